"""A half-precision head (the seed's autocast + GradScaler story, on the CPU).

The epsilon that keeps the inverse norm finite is 1e-10, which float16 rounds to 0.  The same
epsilon on the float32 branch is kept.  The probability clamp's upper bound, 1 - 1e-8, rounds to
1.0 already in float32, so log(1 - p) still meets 0.
"""
import torch
import torch.nn as nn


def inverse_norm_half(features):
    return 1.0 / (features.half().norm(dim=1) + 1e-10)


def inverse_norm_full(features):
    return 1.0 / (features.norm(dim=1) + 1e-10)


def binary_loss(p, y):
    p = torch.clamp(p, 1e-3, 1 - 1e-8)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()


def main(steps=3):
    torch.manual_seed(4)
    model = nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        features = model(torch.randn(8, 4))
        p = torch.sigmoid(features[:, 0])
        loss = binary_loss(p, torch.ones(8)) + inverse_norm_full(features).mean() + inverse_norm_half(features).float().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
