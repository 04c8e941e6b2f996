"""winst13/cs231n-mammogram: the reduced Swish DenseNet that main.py builds for --model=reducedense
(model.helper.get_reduced_densenet, torchvision's DenseNet-201 stem without its ImageNet download) and one step
of main.py's train loop (its Adam, F.binary_cross_entropy on the sigmoid score, util.metrics.evaluate_metrics)
on two synthetic 1-channel 128x128 images; matplotlib, used only for plots, stands in when missing."""
import smoke_support

smoke_support.stand_in("matplotlib.pyplot")

import torch  # noqa: E402
import torch.optim as optim  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import model.mammogram_densenet as mammogram_densenet  # noqa: E402
from model.helper import get_reduced_densenet  # noqa: E402
from util.metrics import evaluate_metrics  # noqa: E402

torch.manual_seed(0)
mammogram_densenet._use_pretrained = False  # no weight download
model = get_reduced_densenet(drop_rate=0)
optimizer = optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3, betas=(0.9, 0.999),
                       weight_decay=0)
x = torch.rand(2, 128, 128).unsqueeze(1)
y = torch.tensor([0.0, 1.0])
model.train()
scores = model(x).view(-1)
optimizer.zero_grad()
loss = F.binary_cross_entropy(scores, y)
loss.backward()
optimizer.step()
evaluate_metrics(scores > 0.5, y)
smoke_support.succeeded(loss)
