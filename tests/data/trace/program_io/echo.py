"""Reads standard input, writes to both streams, warns from inside a torch function, and exits 3."""
import sys

import torch
import torch.nn.functional as F

line = sys.stdin.readline().strip()
print("argv", sys.argv[1:], "cwd-relative file", __file__.endswith("echo.py"))
print("read", line)
print("to stderr", file=sys.stderr)
scores = torch.tensor([[1.0, 2.0, 3.0]])
weights = F.softmax(scores)  # no dim: torch warns, naming this line
print("weights", weights.sum().item(), __name__)
sys.exit(3)
