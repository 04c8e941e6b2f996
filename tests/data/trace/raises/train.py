"""A training loop whose loss call raises on its third step (a label out of range)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def loss_of(model, x, labels):
    return F.cross_entropy(model(x), labels)


torch.manual_seed(0)
model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    labels = torch.randint(0, 3, (8,))
    if step == 2:
        labels[0] = 7
    loss = loss_of(model, torch.randn(8, 4), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("step", step)
