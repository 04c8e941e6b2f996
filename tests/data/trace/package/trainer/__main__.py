"""python -m trainer --steps N: the loss divides by the batch's total error, 0 once the model fits it."""
import argparse

import torch
import torch.nn as nn

from trainer.losses import normalized_error

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
print("steps", args.steps)

torch.manual_seed(0)
model = nn.Linear(2, 2, bias=False)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 2)
for step in range(args.steps):
    target = model(x).detach() if step == 1 else torch.randn(4, 2)
    loss = normalized_error(model(x), target).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
