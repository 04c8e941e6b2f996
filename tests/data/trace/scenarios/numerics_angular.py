"""An angular loss of embeddings against learnable class centres (the angle is the acos of their cosine).

At step 3 one centre is set to the embedding of an example of its class, both a unit vector along the first
axis (so that the cosine is exactly 1 on every CPU), where acos's gradient is infinite.  The atanh of a tanh of small scores is the
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
        if step == 3:  # the first example's embedding is the bias alone, and equals its centre exactly
            with torch.no_grad():
                inputs[0] = 0.0
                encoder.bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0]))
                head.centres[labels[0]] = torch.tensor([1.0, 0.0, 0.0, 0.0])
        embeddings = encoder(inputs)
        loss = head(embeddings, labels) + squash(0.1 * embeddings).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
