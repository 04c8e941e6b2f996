"""jcd496/PyTorch-WaveNet: the repository's WaveNet (model.py, without global conditioning, as train.py builds
it for LJSpeech, smaller) for one cross-entropy step on a synthetic one-hot batch, as train() runs it."""
import smoke_support

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch import optim  # noqa: E402

from model import WaveNet  # noqa: E402

torch.manual_seed(0)
blocks, layers, target_length = 1, 4, 16
receptive_field = sum(2 ** layer for layer in range(layers)) * blocks + 1
model = WaveNet(blocks, layers, False, 1, output_channels=256, residual_channels=8, dilation_channels=8,
                skip_channels=16, end_channels=16)
optimizer = optim.Adam(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
classes = torch.randint(0, 256, (2, receptive_field + target_length - 1))
x = torch.zeros(2, 256, classes.size(1)).scatter_(1, classes.unsqueeze(1), 1.0)
target = torch.randint(0, 256, (2, target_length))
model.train()
output = model(x)
loss = criterion(output.squeeze(), target.view(-1).squeeze())
optimizer.zero_grad()
loss.backward()
optimizer.step()
smoke_support.succeeded(loss)
