import contextlib
import os
import sys

import torch
import torch.nn.functional as F

WATCH = not os.environ.get("TL_NO_WATCH")
if WATCH:
    import torchlint
    Stop = torchlint.NonFiniteValueError
else:
    Stop = ArithmeticError  # never raised without the watch

TEMPERATURES = [1.0, 1.0, 1.0, 0.001, 1.0, 1.0]  # a bad schedule entry at step 3

guard = (torchlint.watch(output_file="w.json", stop_on_first=True) if WATCH
         else contextlib.nullcontext())
try:
    with guard:
        from proj.heads import TemperedClassifier

        torch.manual_seed(0)
        model = TemperedClassifier(8, 6)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for step, temperature in enumerate(TEMPERATURES):
            x = torch.randn(20, 8)
            target = F.one_hot(torch.randint(0, 6, (20,)), 6).float()
            loss = model(x, target, temperature)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"step {step} loss {loss.item():.4f}", flush=True)
except Stop as err:
    print(f"stopped: {type(err).__name__}: {err}", flush=True)
    sys.exit(3)
print("finished all steps")
