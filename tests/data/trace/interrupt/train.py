"""Trains until interrupted: prints "ready" once a step has run, so that Ctrl-C can be sent."""
import sys

import torch

w = torch.ones(3, requires_grad=True)
step = 0
try:
    while True:
        loss = torch.log(w.sum())
        loss.backward()
        step += 1
        if step == 1:
            print("ready", flush=True)
finally:
    print("stopped after", "some steps", file=sys.stderr)
