import torch
import torch.nn as nn


class NormalizedProjector(nn.Module):
    """Projects rows and scales each to unit length."""

    def __init__(self, width, dim):
        super().__init__()
        self.lin = nn.Linear(width, dim, bias=False)

    def forward(self, x):
        h = self.lin(x)
        return h / h.norm(dim=1, keepdim=True)
