import torch


def positive_energy(values, labels):
    positive = (labels > 0).to(values.dtype)
    total = (values.pow(2).sum(dim=1) * positive).sum()
    count = positive.sum()
    return total / count
