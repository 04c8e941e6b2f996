"""Generalized-mean (GeM) pooling of ReLU features, as in the CLIP pooling of the seed notes.

The cube root of a mean of cubes is 0 for a channel that the ReLU switches off over a whole image
(random features do so now and then; step 4 switches off a whole image), and the root's gradient
is infinite there.  The cubes themselves are an integer power: 0 is no edge for them.  The per-channel spread is a
square root too, of a variance that random features never bring to 0.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GeM(nn.Module):
    def __init__(self, p=3.0):
        super().__init__()
        self.p = p

    def forward(self, features):
        pooled = torch.mean(torch.pow(F.relu(features), self.p), dim=1)
        return torch.pow(pooled, 1.0 / self.p)


def spread(features):
    return features.var(dim=0) ** 0.5


def main(steps=6):
    torch.manual_seed(2)
    encoder = nn.Linear(5, 5)
    pool = GeM()
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.01)
    for step in range(steps):
        images = torch.randn(3, 7, 5)
        if step == 4:
            with torch.no_grad():
                images[0] = -1e3 * encoder.weight.sign().sum(0)
        features = encoder(images)
        loss = pool(features).sum() + spread(features.reshape(-1, 5)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
