"""andreasveit/densenet-pytorch: one training step of the repository's DenseNet3 (DenseNet-BC, tiny depth and
growth) on a synthetic CIFAR-sized batch, with train.py's loss (CrossEntropyLoss) and optimizer (SGD, nesterov,
momentum 0.9, weight decay 1e-4); train.py's own train() moves every batch to the GPU unconditionally, so the
step is run from the model, loss and optimizer directly."""
import smoke_support

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import densenet as dn  # noqa: E402

torch.manual_seed(0)
model = dn.DenseNet3(10, 10, 4, reduction=0.5, bottleneck=True, dropRate=0.1)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
model.train()
inputs, targets = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
output = model(inputs)
loss = criterion(output, targets)
optimizer.zero_grad()
loss.backward()
optimizer.step()
smoke_support.succeeded(loss)
