"""A count-weighted loss (vamb-style depths): the log of per-class counts, 0 for a class absent
from the batch (step 1 has one).  The log of the feature scale is flagged alike, but the scale of
random features is never 0."""
import torch
import torch.nn as nn


def log_counts(labels, classes):
    counts = torch.stack([(labels == c).sum() for c in range(classes)]).float()
    return torch.log(counts)


def log_scale(features):
    return torch.log(features.std(dim=0))


def main(steps=4):
    torch.manual_seed(3)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(12, 4)
        labels = torch.arange(12) % 3
        if step == 1:
            labels = labels.clamp(max=1)
        weights = -log_counts(labels, 3)
        logits = model(x)
        loss = (weights[labels] * logits.logsumexp(1)).mean() + log_scale(logits).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
