import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from net import Encoder
from objective import radius_loss

BAD_STEP = 3
BAD_RANK = 1


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Encoder(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(6):
        x = torch.randn(32, 8, generator=gen)
        if rank == BAD_RANK and step == BAD_STEP:
            x[7] = 0.0  # an all-zero sample: bias-free encoder gives radius exactly 0
        loss = radius_loss(model(x))
        optimizer.zero_grad()
        loss.backward()
        finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f} grads finite {finite}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
