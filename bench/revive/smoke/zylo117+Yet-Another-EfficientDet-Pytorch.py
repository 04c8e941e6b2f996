"""zylo117/Yet-Another-EfficientDet-Pytorch: EfficientDet-D0 (EfficientDetBackbone with projects/shape.yml's
anchors and classes, the repository's init_weights, no pretrained download) wrapped in train.py's ModelWithLoss
(FocalLoss), and one step of train.py's loop (AdamW, summed mean losses, backward, step) on two synthetic 256x256
images with two boxes each; tensorboardX, cv2, webcolors and pycocotools (logging, drawing and the COCO loader)
stand in when missing."""
import smoke_support

smoke_support.stand_in("tensorboardX", "cv2", "webcolors", "pycocotools.coco")

import torch  # noqa: E402

from backbone import EfficientDetBackbone  # noqa: E402
from train import ModelWithLoss, Params  # noqa: E402
from utils.utils import init_weights  # noqa: E402

torch.manual_seed(42)
params = Params("projects/shape.yml")
model = EfficientDetBackbone(num_classes=len(params.obj_list), compound_coef=0,
                             ratios=eval(params.anchors_ratios), scales=eval(params.anchors_scales))
init_weights(model)
model = ModelWithLoss(model, debug=False)
optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
model.train()
imgs = torch.randn(2, 3, 256, 256)
annot = torch.tensor([[[20.0, 30.0, 120.0, 140.0, 0.0], [100.0, 90.0, 220.0, 200.0, 1.0]],
                      [[40.0, 40.0, 160.0, 100.0, 1.0], [-1.0, -1.0, -1.0, -1.0, -1.0]]])
optimizer.zero_grad()
cls_loss, reg_loss = model(imgs, annot, obj_list=params.obj_list)
loss = cls_loss.mean() + reg_loss.mean()
loss.backward()
optimizer.step()
smoke_support.succeeded(loss)
