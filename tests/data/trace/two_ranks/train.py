"""Data-parallel training on two gloo ranks (CPU): at step 2, rank 1's batch holds a sample whose distance is
0, and the root's infinite gradient reaches rank 0 through DistributedDataParallel's gradient all-reduce.
With ``metric``, the gradients stay finite and at step 2 rank 1's share of a logged statistic is 0/0, which
``dist.all_reduce`` hands to rank 0.

    torchrun --standalone --nproc-per-node 2 train.py [metric]
"""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    metric = sys.argv[1:] == ["metric"]
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    for step in range(4):
        left, right = torch.randn(16, 8), torch.randn(16, 8)
        if step == 2 and rank == 1 and not metric:
            right[0] = left[0]
        distance = (model(left) - model(right)).pow(2).sum(1).sqrt()
        loss = distance.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if metric:
            hits = torch.zeros(1) if step == 2 and rank == 1 else torch.ones(1)
            statistic = loss.detach().reshape(1) * hits / hits.sum()
            dist.all_reduce(statistic)
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
