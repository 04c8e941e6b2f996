"""twtygqyy/pytorch-vdsr: the repository's train() from main_vdsr.py for one epoch of VDSR's Net over 100
synthetic batches of two 1-channel 8x8 patches (train() logs the loss at every 100th iteration, which any real
epoch reaches), with main_vdsr.py's default options (lr 0.1, SGD with momentum 0.9 and weight decay 1e-4,
gradient clip 0.4, MSELoss(size_average=False)); h5py, which only its HDF5 dataset (not used here) needs,
stands in when missing."""
import smoke_support

smoke_support.stand_in("h5py")

from argparse import Namespace  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.optim as optim  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import main_vdsr  # noqa: E402
from vdsr import Net  # noqa: E402

torch.manual_seed(0)
main_vdsr.opt = Namespace(batchSize=2, nEpochs=1, lr=0.1, step=10, cuda=False, resume="", start_epoch=1, clip=0.4,
                          threads=0, momentum=0.9, weight_decay=1e-4, pretrained="", gpus="0")
opt = main_vdsr.opt
patches = TensorDataset(torch.randn(200, 1, 8, 8), torch.randn(200, 1, 8, 8))
training_data_loader = DataLoader(dataset=patches, num_workers=opt.threads, batch_size=opt.batchSize, shuffle=True)
model = Net()
main_vdsr.model = model
criterion = nn.MSELoss(size_average=False)
optimizer = optim.SGD(model.parameters(), lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay)
main_vdsr.train(training_data_loader, optimizer, model, criterion, 1)
inputs, targets = patches[:4]
smoke_support.succeeded(criterion(model(inputs), targets))
