"""An entropy bonus over sparse attention weights, a log-sum-exp score, and a distillation term.

p * log(p) is 0 * -inf = NaN where a weight is exactly 0 (ReLU-normalised weights have zeros).
The hand-written log-sum-exp only overflows above ~88, and the scores stay small.  kl_div is given
probabilities where it wants log-probabilities, on every call.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def entropy(weights):
    return -(weights * torch.log(weights)).sum(1).mean()


def log_sum_exp(scores):
    return torch.log(torch.sum(torch.exp(scores), dim=1))


def main(steps=3):
    torch.manual_seed(8)
    student, teacher = nn.Linear(4, 5), nn.Linear(4, 5)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(6, 4)
        scores = student(x)
        weights = F.normalize(F.relu(scores) + (0.0 if step == 1 else 0.1), p=1, dim=1)
        distill = F.kl_div(F.softmax(scores, dim=1), F.softmax(teacher(x), dim=1), reduction="batchmean")
        loss = distill - 0.01 * entropy(weights) + 0.1 * log_sum_exp(scores).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
