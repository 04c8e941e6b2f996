"""Pooling and similarity heads for a CLIP-style retrieval model."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def check_nan(x: Tensor) -> bool:
    return True in torch.isnan(x)


def zero_filtering(x: Tensor, eps: float = 1e-4) -> Tensor:
    x[x <= eps] = eps
    return x


class GeMPooling(nn.Module):
    """Generalized mean pooling: mean pooling <= GeM <= max pooling."""

    def __init__(self, p: float = 3.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, last_hidden_state: Tensor) -> Tensor:
        p_embeddings = torch.pow(last_hidden_state, self.p)
        sum_embeddings = torch.mean(p_embeddings, 1)
        return torch.pow(sum_embeddings, 1.0 / self.p)


def cosine_similarity(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def normalize(embeddings: Tensor) -> Tensor:
    return embeddings / embeddings.norm(dim=-1, keepdim=True)


def rms(x: Tensor) -> Tensor:
    return torch.sqrt(torch.mean(x ** 2, dim=-1)) + 1e-6


class MaskedMean(nn.Module):
    def forward(self, hidden: Tensor, mask: Tensor) -> Tensor:
        summed = (hidden * mask.unsqueeze(-1)).sum(1)
        return summed / mask.sum(1, keepdim=True)


class ContrastiveLoss(nn.Module):
    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = scale
        self.cross_entropy = nn.CrossEntropyLoss()

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        scores = cosine_similarity(a.unsqueeze(1), b.unsqueeze(0)) * self.scale
        labels = torch.tensor(range(len(scores)), dtype=torch.long, device=scores.device)
        return self.cross_entropy(F.softmax(scores, dim=-1), labels)
