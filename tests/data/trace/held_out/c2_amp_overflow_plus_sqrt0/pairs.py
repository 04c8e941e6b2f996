import torch
import torch.nn.functional as F


def pair_distance(a, b):
    diff = a - b
    return diff.pow(2).sum(dim=1).sqrt()


def pair_loss(a, b, margin=1.0, weight=0.05):
    distance = pair_distance(a, b)
    hinge = F.relu(margin - distance).pow(2).mean()
    activity = F.softplus(a).mean() + F.softplus(b).mean()
    return activity + weight * hinge
