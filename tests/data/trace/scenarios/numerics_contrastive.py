"""A siamese network trained with the contrastive loss (after adambielski/siamese-triplet#18).

The distance is the square root of a sum of squares: 0 for a pair of identical inputs, where its
gradient is infinite.  Step 3 feeds such a pair.  The norm of the embeddings is written the same
way, but random embeddings are never all zero.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ContrastiveLoss(nn.Module):
    def __init__(self, margin):
        super().__init__()
        self.margin = margin

    def forward(self, output1, output2, target):
        distances = (output2 - output1).pow(2).sum(1)
        losses = 0.5 * (target * distances + (1 - target) * F.relu(self.margin - distances.sqrt()).pow(2))
        return losses.mean()


def embedding_norm(embedding):
    return torch.sqrt((embedding ** 2).sum(1)).mean()


def main(steps=6):
    torch.manual_seed(0)
    net = nn.Linear(8, 4)
    criterion = ContrastiveLoss(margin=1.0)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    for step in range(steps):
        left, right = torch.randn(16, 8), torch.randn(16, 8)
        if step == 3:
            right[0] = left[0]
        a, b = net(left), net(right)
        loss = criterion(a, b, torch.zeros(16)) + 1e-3 * embedding_norm(a)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
