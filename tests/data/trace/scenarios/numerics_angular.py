"""An angular loss of embeddings against learnable class centres (the angle is the acos of their cosine).

At step 3 one centre is set to the embedding of an example of its class: their cosine is 1 (past it, by
rounding), where acos's gradient is infinite (NaN past 1).  The atanh of a tanh of small scores is the
look-alike: the tanh never comes near ±1.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AngularHead(nn.Module):
    def __init__(self, dim=4, classes=3):
        super().__init__()
        self.centres = nn.Parameter(torch.randn(classes, dim))

    def forward(self, embeddings, labels):
        cosine = F.cosine_similarity(embeddings, self.centres[labels], dim=1)
        return torch.acos(cosine).mean()


def squash(scores):
    return torch.atanh(torch.tanh(scores))


def main(steps=5):
    torch.manual_seed(0)
    encoder = nn.Linear(4, 4)
    head = AngularHead()
    optimizer = torch.optim.SGD(list(encoder.parameters()) + list(head.parameters()), lr=0.01)
    for step in range(steps):
        inputs = torch.randn(6, 4)
        labels = torch.randint(0, 3, (6,))
        embeddings = encoder(inputs)
        if step == 3:
            with torch.no_grad():
                head.centres[labels[0]] = embeddings[0]
        loss = head(embeddings, labels) + squash(0.1 * embeddings).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
