import torch
import torch.nn as nn


class TemperedClassifier(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.fc = nn.Linear(width, classes)

    def forward(self, x, target, temperature):
        logits = self.fc(x) / temperature
        probs = torch.softmax(logits, dim=1)
        log_probs = torch.log(probs)
        return -(log_probs * target).sum(dim=1).mean()
