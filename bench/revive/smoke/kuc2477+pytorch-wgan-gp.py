"""kuc2477/pytorch-wgan-gp: the repository's train() for one epoch of one synthetic batch of 32 CIFAR-sized
images, with main.py's default batch size (its critic's view() only fits a batch of 32 at this size);
visdom, its dashboard, stands in when missing."""
import smoke_support

smoke_support.stand_in("visdom")

import torch  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

import utils  # noqa: E402
from model import WGAN  # noqa: E402
from train import train  # noqa: E402

torch.manual_seed(0)
wgan = WGAN(label="smoke", z_size=16, image_size=32, image_channel_size=3, c_channel_size=8, g_channel_size=8)
utils.gaussian_intiailize(wgan, 0.02)
images = TensorDataset(torch.randn(32, 3, 32, 32), torch.zeros(32))
train(wgan, images, batch_size=32, sample_size=32, epochs=1, checkpoint_interval=10**9, image_log_interval=10**9,
      loss_log_interval=10**9, checkpoint_dir="/tmp/revive-checkpoints")
smoke_support.succeeded(wgan.g_loss(wgan.sample_noise(32)))
