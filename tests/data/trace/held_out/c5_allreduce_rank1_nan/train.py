import torch
import torch.distributed as dist
import torch.nn as nn

from stats import positive_energy

BAD_STEP = 2


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = nn.Linear(6, 3)  # each rank trains its own copy, no DDP
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(5):
        x = torch.randn(16, 6)
        labels = torch.randint(0, 2, (16,))
        if rank == 1 and step == BAD_STEP:
            labels.zero_()  # no positive sample on this rank at this step
        with torch.no_grad():
            energy = positive_energy(model(x), labels)
        dist.all_reduce(energy)
        energy = energy / world
        loss = model(x).pow(2).mean() / energy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"rank {rank} step {step} energy {energy.item():.4f} loss {loss.item():.4f}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
