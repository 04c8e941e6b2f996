import torch
import torch.nn as nn


class KeyScorer(nn.Module):
    def __init__(self, width, keys):
        super().__init__()
        self.keys = nn.Parameter(torch.randn(keys, width))
        self.head = nn.Linear(keys, 1)

    def forward(self, x):
        scores = x @ self.keys.t()
        gated = torch.tanh(scores)
        return self.head(gated).float().squeeze(1)
