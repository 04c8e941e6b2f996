import torch
import torch.nn as nn


class Embedder(nn.Module):
    def __init__(self, width, dim):
        super().__init__()
        self.proj = nn.Linear(width, dim)

    def forward(self, left, right):
        # one pass for both sides: a single matmul node in the backward
        both = self.proj(torch.cat([left, right]))
        return both.float().chunk(2)
