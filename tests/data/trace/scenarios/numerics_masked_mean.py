"""Token-level regression averaged over a mask, with features normalised to unit length.

The mean divides by the mask's count: a batch whose mask is empty (step 2) makes it 0 / 0.  The
features are divided by their norm too, but random features never have a zero norm.
"""
import torch
import torch.nn as nn


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def unit(features):
    return features / features.norm(dim=-1, keepdim=True)


def main(steps=5):
    torch.manual_seed(1)
    model = nn.Linear(6, 6)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x, target = torch.randn(4, 10, 6), torch.randn(4, 10, 6)
        mask = (torch.rand(4, 10, 1) > 0.3).float()
        if step == 2:
            mask = torch.zeros(4, 10, 1)
        error = (unit(model(x)) - unit(target)).pow(2)
        loss = masked_mean(error, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
