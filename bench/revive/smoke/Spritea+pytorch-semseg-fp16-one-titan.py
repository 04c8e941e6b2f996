"""Spritea/pytorch-semseg-fp16-one-titan: a U-Net from the repository's model registry (get_model) and its
default loss (get_loss_function without a configured loss: cross_entropy2d), one step as train.py runs it,
on a synthetic 3-channel image batch with 4 classes."""
import smoke_support

smoke_support.stand_in("tensorboardX", "cv2", "natsort", "google.protobuf.internal")

import torch  # noqa: E402

from ptsemseg.loss import get_loss_function  # noqa: E402
from ptsemseg.models import get_model  # noqa: E402

torch.manual_seed(0)
model = get_model({"arch": "unet"}, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
loss_fn = get_loss_function({"training": {"loss": None}})
images = torch.randn(1, 3, 188, 188)  # the unpadded U-Net needs room for four poolings
model.train()
optimizer.zero_grad()
outputs = model(images)
labels = torch.randint(0, 4, (1, outputs.size(2), outputs.size(3)))
loss = loss_fn(input=outputs, target=labels)
loss.backward()
optimizer.step()
smoke_support.succeeded(loss)
