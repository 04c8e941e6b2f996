"""bamos/densenet.pytorch: the repository's train() for one epoch (one synthetic batch of 4 CIFAR-sized images)
of its DenseNet (DenseNet-BC, tiny depth and growth) with main()'s SGD optimizer and adjust_opt, on the CPU
(args.cuda False, as --no-cuda gives); setproctitle and graphviz (process title, debug graph) stand in when
missing."""
import os
import tempfile
from types import SimpleNamespace

import smoke_support

smoke_support.stand_in("setproctitle", "graphviz")

import torch  # noqa: E402
import torch.optim as optim  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import densenet  # noqa: E402
import train as train_script  # noqa: E402

torch.manual_seed(0)
net = densenet.DenseNet(growthRate=4, depth=10, reduction=0.5, bottleneck=True, nClasses=10)
optimizer = optim.SGD(net.parameters(), lr=1e-1, momentum=0.9, weight_decay=1e-4)
images = TensorDataset(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,)))
trainLoader = DataLoader(images, batch_size=4, shuffle=True)
args = SimpleNamespace(cuda=False, opt="sgd")
with tempfile.TemporaryDirectory() as save:
    with open(os.path.join(save, "train.csv"), "w") as trainF:
        train_script.adjust_opt(args.opt, optimizer, 1)
        train_script.train(args, 1, net, trainLoader, optimizer, trainF)
data, target = images[:4]
smoke_support.succeeded(torch.nn.functional.nll_loss(net(data), target))
