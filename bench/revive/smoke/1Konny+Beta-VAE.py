"""1Konny/Beta-VAE: the repository's Solver (BetaVAE_H, objective H, beta 10, as run_celeba_H_beta10_z10.sh sets
it) built from main.py's defaults, then Solver.train for one iteration (max_iter 1) over a CelebA-style image folder
of 8 synthetic random-pixel PNGs read by the repository's own return_data; display_step 1 so the loop's own loss
printout runs on that first iteration (visdom off, no traverse images saved); visdom stands in when missing."""
import os
import tempfile
from types import SimpleNamespace

import smoke_support

smoke_support.stand_in("visdom")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from solver import Solver, reconstruction_loss, kl_divergence  # noqa: E402

torch.manual_seed(1)
np.random.seed(1)
root = tempfile.mkdtemp(prefix="revive-betavae-")
os.makedirs(os.path.join(root, "data", "CelebA", "img"))
for k in range(8):
    pixels = np.random.randint(0, 256, (72, 72, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(os.path.join(root, "data", "CelebA", "img", f"{k:03d}.png"))

args = SimpleNamespace(
    train=True, seed=1, cuda=True, max_iter=1, batch_size=4,
    z_dim=10, beta=10, objective="H", model="H", gamma=1000, C_max=25, C_stop_iter=1e5,
    lr=1e-4, beta1=0.9, beta2=0.999,
    dset_dir=os.path.join(root, "data"), dataset="celeba", image_size=64, num_workers=0,
    viz_on=False, viz_name="celeba_H_beta10_z10", viz_port=8097, save_output=False,
    output_dir=os.path.join(root, "outputs"),
    gather_step=1000, display_step=1, save_step=10000,
    ckpt_dir=os.path.join(root, "checkpoints"), ckpt_name="last",
)
net = Solver(args)
net.train()

x = next(iter(net.data_loader))
x_recon, mu, logvar = net.net(x)
total_kld, _, _ = kl_divergence(mu, logvar)
smoke_support.succeeded(reconstruction_loss(x, x_recon, net.decoder_dist) + args.beta * total_kld)
