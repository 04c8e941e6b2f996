import torch
import torch.nn.functional as F

from scorer import KeyScorer

BAD_STEP = 4

torch.manual_seed(0)
model = KeyScorer(32, 8)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", init_scale=256.0)

for step in range(8):
    x, y = torch.randn(64, 32), torch.randn(64)
    if step == BAD_STEP:
        x[3] = 40000.0  # an unnormalised reading, still finite in float16
    with torch.autocast("cpu", dtype=torch.float16):
        pred = model(x)
        loss = F.mse_loss(pred, y)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    skipped = scaler.get_scale() < before
    print(f"step {step} loss {loss.item():.4f} skipped {skipped}")
