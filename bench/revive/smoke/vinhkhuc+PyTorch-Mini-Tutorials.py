"""vinhkhuc/PyTorch-Mini-Tutorials: 5_convolutional_net.py's ConvNet, loss and SGD optimizer built as its main()
builds them, and the script's own train() step on two synthetic MNIST-shaped batches of 100 (main() itself
would download MNIST through data_util.load_mnist)."""
import importlib

import smoke_support

import torch  # noqa: E402
from torch import optim  # noqa: E402

convnet = importlib.import_module("5_convolutional_net")

torch.manual_seed(42)
model = convnet.ConvNet(output_dim=10)
loss = torch.nn.CrossEntropyLoss(reduction='elementwise_mean')
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
trX = torch.rand(200, 1, 28, 28)
trY = torch.randint(0, 10, (200,))
cost = 0.
for k in range(2):
    start, end = k * 100, (k + 1) * 100
    cost += convnet.train(model, loss, optimizer, trX[start:end], trY[start:end])
predY = convnet.predict(model, trX[:100])
smoke_support.succeeded(torch.tensor(cost / 2))
