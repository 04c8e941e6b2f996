"""tonylins/pytorch-mobilenet-v2: the repository has the model only (no training script), so this builds it as
its README does, mobilenet_v2() (with pretrained=False: no download), and runs one training step of the README's
training recipe (SGD with lr 0.05 and weight decay 4e-5 under a cosine learning-rate schedule; momentum 0.9, which
the README leaves unsaid, is the usual ImageNet setting; cross-entropy over its 1000 classes) on a synthetic batch of
two 64x64 RGB images."""
import smoke_support

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from MobileNetV2 import mobilenet_v2  # noqa: E402

torch.manual_seed(0)
net = mobilenet_v2(pretrained=False)
net.train()
optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=4e-5)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=150)
criterion = nn.CrossEntropyLoss()
images, labels = torch.randn(2, 3, 64, 64), torch.randint(0, 1000, (2,))
loss = criterion(net(images), labels)
optimizer.zero_grad()
loss.backward()
optimizer.step()
scheduler.step()
smoke_support.succeeded(loss)
