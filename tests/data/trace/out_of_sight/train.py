"""A model compiled by torch.compile (TorchDynamo with its eager backend: no C compiler needed) fed by a
DataLoader with two worker processes; the dataset's first item divides zeros by their sum (0/0).

    python train.py [clean]
"""
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Shares(Dataset):
    def __init__(self, clean):
        self.clean = clean

    def __len__(self):
        return 8

    def __getitem__(self, index):
        counts = torch.ones(4) * (index + 1 if self.clean else index)
        return counts / counts.sum()


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    fast = torch.compile(model, backend="eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Shares(sys.argv[1:] == ["clean"]), batch_size=4, num_workers=2)
    for batch in loader:
        loss = fast(batch).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.6f}")
    print(" ".join(repr(v) for v in model.weight.flatten().tolist()))


if __name__ == "__main__":
    main()
