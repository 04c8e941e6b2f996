import torch


def radius_loss(feats, target_radius=2.0):
    radius = feats.pow(2).sum(dim=1).sqrt()
    return (radius - target_radius).pow(2).mean()
