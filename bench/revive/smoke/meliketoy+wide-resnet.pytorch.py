"""meliketoy/wide-resnet.pytorch: one training step of the repository's Wide_ResNet (depth 10, widen factor 1,
dropout 0.3) initialised with its conv_init, on a synthetic CIFAR-sized batch, with main.py's loss
(CrossEntropyLoss) and optimizer (SGD at config.learning_rate for epoch 1, momentum 0.9, weight decay 5e-4);
main.py is a script that downloads CIFAR at import, so its train() body is run from the model, loss and
optimizer directly."""
import smoke_support

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.optim as optim  # noqa: E402

import config as cf  # noqa: E402
from networks import Wide_ResNet, conv_init  # noqa: E402

torch.manual_seed(0)
net = Wide_ResNet(10, 1, 0.3, 10)
net.apply(conv_init)
criterion = nn.CrossEntropyLoss()
net.train()
optimizer = optim.SGD(net.parameters(), lr=cf.learning_rate(0.1, 1), momentum=0.9, weight_decay=5e-4)
inputs, targets = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
optimizer.zero_grad()
outputs = net(inputs)
loss = criterion(outputs, targets)
loss.backward()
optimizer.step()
smoke_support.succeeded(loss)
