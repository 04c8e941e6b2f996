"""jayzhan211/CycleGAN-pytorch: the repository's CycleGAN model (create_model with TrainOptions parsed as train.py
parses them: --model cycle_gan, small resnet_6blocks generators and PatchGAN discriminators, CPU) and one
model.train() step (both generators' LSGAN + cycle + identity losses, then both discriminators) on a synthetic
unaligned pair of 64x64 images; cv2, used only by image utilities, stands in when missing."""
import sys

import smoke_support

smoke_support.stand_in("cv2")

import torch  # noqa: E402

from models import create_model  # noqa: E402
from options.train_options import TrainOptions  # noqa: E402

torch.manual_seed(0)
sys.argv = ["train.py", "--dataroot", "/tmp/revive-none", "--name", "smoke", "--model", "cycle_gan",
            "--gpu_ids", "-1", "--checkpoints_dir", "/tmp/revive-checkpoints", "--ngf", "8", "--ndf", "8",
            "--netG", "resnet_6blocks", "--display_id", "0", "--crop_size", "64", "--load_size", "64"]
opt = TrainOptions().parse()
model = create_model(opt)
model.setup(opt)
model.set_input({"A": torch.randn(1, 3, 64, 64), "B": torch.randn(1, 3, 64, 64), "A_paths": ["a"], "B_paths": ["b"]})
model.train(display=False)
smoke_support.succeeded(model.loss_G)
