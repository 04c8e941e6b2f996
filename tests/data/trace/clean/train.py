"""A small classifier trained with the stable forms, then a transformer layer run in inference (its fused
fast path): nothing for the numerics rules to flag, and every printed value exact."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
for step in range(5):
    logits = model(x)
    loss = F.cross_entropy(logits, y) + 1e-3 * F.log_softmax(logits, dim=1).exp().pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item()!r}")

encoder = nn.TransformerEncoderLayer(16, 4, batch_first=True).eval()
with torch.no_grad():
    encoded = encoder(torch.randn(2, 5, 16))
print("encoded", encoded.sum().item(), encoded.abs().max().item())
