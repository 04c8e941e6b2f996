import torch

from embedder import Embedder
from pairs import pair_loss

HAZARD_STEP = 9

torch.manual_seed(0)
model = Embedder(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 22)

for step in range(12):
    left, right = torch.rand(128, 16), torch.rand(128, 16)
    if step == HAZARD_STEP:
        right[5] = left[5]  # an identical pair: distance exactly 0
    with torch.autocast("cpu", dtype=torch.float16):
        a, b = model(left, right)
        loss = pair_loss(a, b)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    grads = [p.grad for p in model.parameters()]
    has_inf = any(bool(torch.isinf(g).any()) for g in grads)
    has_nan = any(bool(torch.isnan(g).any()) for g in grads)
    before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    skipped = scaler.get_scale() < before
    print(f"step {step} loss {loss.item():.4f} scale {before:g} "
          f"inf {has_inf} nan {has_nan} skipped {skipped}")
