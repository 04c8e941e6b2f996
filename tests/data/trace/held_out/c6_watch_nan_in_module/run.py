import contextlib
import os

import torch

WATCH = not os.environ.get("TL_NO_WATCH")
if WATCH:
    import torchlint

BAD_STEP = 2


def guard():
    if WATCH:
        return torchlint.watch(output_file="w.json")
    return contextlib.nullcontext()


with guard() as seen:
    from proj.layers import NormalizedProjector

    torch.manual_seed(0)
    model = NormalizedProjector(10, 5)
    anchor = torch.randn(5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        x = torch.randn(12, 10)
        if step == BAD_STEP:
            x[4] = 0.0  # an empty sample: its projection has norm 0
        loss = -(model(x) @ anchor).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")

if WATCH:
    print("first_nonfinite:", seen.first_nonfinite)
    print("confirmed:", [f["code"] for f in seen.findings if f["confirmed"]])
