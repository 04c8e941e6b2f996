"""A float16 autocast loop with a GradScaler whose first scales overflow (the scaler skips those steps).

    python train.py [sqrt|forward]

sqrt: at step 9 a root of zeros joins the loss (its gradient is infinite whatever the scale).
forward: at step 9 an activation overflows float16 in the forward pass.
"""
import sys

import torch
from torch import nn

plant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24)
x = torch.randn(32, 16)
y = torch.randn(32, 1)
for step in range(12):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
        if plant == "forward" and step == 9:
            out = out * 1e5 * 1e5
        loss = ((out.float() - y) ** 2).mean()
    if plant == "sqrt" and step == 9:
        loss = loss + torch.sqrt(out.float().abs() * 0).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    print(step, scaler.get_scale(), round(loss.item(), 4))
