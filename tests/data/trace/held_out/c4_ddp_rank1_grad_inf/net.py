import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width, dim):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, 16, bias=False), nn.ReLU(),
                                  nn.Linear(16, dim, bias=False))

    def forward(self, x):
        return self.body(x)
