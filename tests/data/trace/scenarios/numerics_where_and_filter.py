"""Guards that come too late: a torch.where around a root, and a NaN filter after a log.

Both branches of torch.where are differentiated: at distance 0 (step 2) the root's infinite
gradient times 0 is NaN.  nan_to_num hides log(0) = -inf in the forward pass only.  A filter
after the root of a variance is flagged alike, but the variance never reaches 0.
"""
import torch
import torch.nn as nn


def safe_distance(a, b):
    d = ((a - b) ** 2).sum(1)
    return torch.where(d > 0, torch.sqrt(d), torch.zeros_like(d))


def log_weights(w):
    return torch.nan_to_num(torch.log(w), neginf=0.0)


def filtered_spread(x):
    return torch.nan_to_num(torch.sqrt(x.var(0)))


def main(steps=4):
    torch.manual_seed(5)
    model = nn.Linear(3, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(6, 3)
        y = model(x)
        target = y.detach().clone() if step == 2 else torch.randn(6, 3)
        weights = torch.relu(y[:, 0])
        loss = safe_distance(y, target).mean() + log_weights(weights).mean() + filtered_spread(y).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
