"""A notebook-cell ranking model: one score per cell, trained with mixed precision."""
import torch
import torch.nn as nn
from torch import Tensor


class CellRanker(nn.Module):
    def __init__(self, encoder: nn.Module, hidden: int, pooling: nn.Module) -> None:
        super().__init__()
        self.feature = encoder
        self.pooling = pooling
        self.fc = nn.Linear(hidden, 1)

    def forward(self, inputs: dict, position_list: Tensor) -> Tensor:
        feature = self.feature(**inputs).last_hidden_state
        pred = []
        for i in range(feature.size(0)):
            for src, end in position_list[i]:
                embedding = self.pooling(feature[i, src : end + 1, :].unsqueeze(dim=0))
                logit = self.fc(embedding)
                pred.append(logit)
        pred = torch.as_tensor(pred, device=feature.device)
        return pred


def train_step(model, optimizer, scaler, batch, margin_loss):
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        scores = model(batch["inputs"], batch["positions"])
        pos, neg = scores[0::2], scores[1::2]
        ranking = margin_loss(pos, neg, torch.ones_like(pos))
        regression = nn.functional.mse_loss(scores, batch["target"])
    scaler.scale(ranking).backward()
    scaler.scale(regression).backward()
    scaler.step(optimizer)
    scaler.update()
    return ranking.item() + regression.item()
