"""Classification with a hand-written log-softmax (after RasmussenLab/vamb#12), and small-value logs.

log(softmax(z)) is -inf once a probability underflows to 0: step 3 sharpens the logits by 100.
The auxiliary head adds an eps the float32 precision keeps, so its log never meets 0.  log(1 + x)
of a tiny rate loses every digit; exp(z) - 1 of unit-sized values loses nothing.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def nll(logits, labels):
    probabilities = F.softmax(logits, dim=1)
    return -torch.log(probabilities).gather(1, labels[:, None]).mean()


def auxiliary_nll(logits, labels):
    return -torch.log(F.softmax(logits, dim=1) + 1e-6).gather(1, labels[:, None]).mean()


def growth(rate):
    return torch.log(1 + rate)


def excess(z):
    return torch.exp(z) - 1


def main(steps=5):
    torch.manual_seed(6)
    model = nn.Linear(5, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x, labels = torch.randn(8, 5), torch.randint(0, 4, (8,))
        logits = model(x) * (100.0 if step == 3 else 1.0)
        rate = torch.full((8,), 1e-9) * model.bias.abs().sum()
        loss = nll(logits, labels) + auxiliary_nll(logits, labels) + growth(rate).sum() + excess(logits.tanh()).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
