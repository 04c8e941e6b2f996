"""The Inf trap of the seed notes: the gradient of sqrt at 0 is inf, and anomaly detection does not
raise on it (it only looks for NaN)."""
import torch

torch.autograd.set_detect_anomaly(True)

x = torch.tensor(0.0, requires_grad=True)
y = torch.sqrt(x)
y.backward()
print(x.grad, torch.isfinite(x.grad))
