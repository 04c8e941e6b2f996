import os

import torch
import torch.nn.functional as F


def maybe_watch(fn):
    if os.environ.get("TL_NO_WATCH"):
        return fn
    import torchlint
    return torchlint.watch(output_file="w.json")(fn)


@maybe_watch
def train(steps):
    from proj.blocks import ResidualMLP

    torch.manual_seed(0)
    model = ResidualMLP(4, 8)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    true_w = torch.tensor([0.5, -1.0, 2.0, 0.25])
    for step in range(steps):
        x = torch.randn(32, 4) * 3.0 + 1.0
        y = torch.sin(x @ true_w)
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item()!r}")
    return model


model = train(25)
for name, p in model.named_parameters():
    print(name, [repr(v) for v in p.detach().flatten().tolist()])
