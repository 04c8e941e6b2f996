import torch

from head import PositiveHead

torch.manual_seed(0)
model = PositiveHead(16)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24)

for step in range(12):
    x = torch.rand(256, 16)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model.loss(x)
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
