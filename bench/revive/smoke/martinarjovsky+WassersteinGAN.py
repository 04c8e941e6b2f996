"""martinarjovsky/WassersteinGAN: the repository's main.py run as a script (its whole training loop lives under
`if __name__ == "__main__"`), as the README runs it with `--dataset folder`, for one epoch (--niter 1) of a DCGAN
critic and generator at 16x16 (--imageSize 16, --nz/--ngf/--ndf 8, batch 4, no workers, no --cuda) over an image
folder of 8 synthetic random-pixel PNGs, samples and checkpoints going to a temporary --experiment folder."""
import os
import runpy
import sys
import tempfile

import smoke_support

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import models.dcgan  # noqa: E402,F401  (the repository's models, imported by main.py)

np.random.seed(0)
root = tempfile.mkdtemp(prefix="revive-wgan-")
os.makedirs(os.path.join(root, "images", "all"))
for k in range(8):
    pixels = np.random.randint(0, 256, (20, 20, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(os.path.join(root, "images", "all", f"{k:03d}.png"))

sys.argv = ["main.py", "--dataset", "folder", "--dataroot", os.path.join(root, "images"), "--workers", "0",
            "--batchSize", "4", "--imageSize", "16", "--nz", "8", "--ngf", "8", "--ndf", "8", "--niter", "1",
            "--experiment", os.path.join(root, "samples")]
script = runpy.run_path("main.py", run_name="__main__")
smoke_support.succeeded(script["errD"])
