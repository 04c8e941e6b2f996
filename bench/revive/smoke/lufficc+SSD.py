"""lufficc/SSD: the VGG SSD300 detector from configs/vgg_ssd300_voc0712.yaml (build_detection_model, no pretrained
download, on the CPU) with the repository's optimizer and LR scheduler, trained by its do_train for one iteration
of two synthetic 300x300 images whose targets come from the repository's own SSDTargetTransform and
BatchCollator (MultiBoxLoss inside the box head); cv2 (image transforms) and six (VOC evaluation) stand in
when missing."""
from types import SimpleNamespace

import smoke_support

smoke_support.stand_in("cv2", "six")

import torch  # noqa: E402

from ssd.config import cfg  # noqa: E402
from ssd.data.build import BatchCollator  # noqa: E402
from ssd.data.transforms import build_target_transform  # noqa: E402
from ssd.engine.trainer import do_train  # noqa: E402
from ssd.modeling.detector import build_detection_model  # noqa: E402
from ssd.solver.build import make_lr_scheduler, make_optimizer  # noqa: E402
from ssd.utils.checkpoint import CheckPointer  # noqa: E402

torch.manual_seed(0)
cfg.merge_from_file("configs/vgg_ssd300_voc0712.yaml")
cfg.merge_from_list(["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAINED", False, "SOLVER.BATCH_SIZE", 2,
                     "OUTPUT_DIR", ""])
cfg.freeze()
model = build_detection_model(cfg)
optimizer = make_optimizer(cfg, model, cfg.SOLVER.LR)
scheduler = make_lr_scheduler(cfg, optimizer, cfg.SOLVER.LR_STEPS)
checkpointer = CheckPointer(model, optimizer, scheduler, cfg.OUTPUT_DIR, True)
target_transform = build_target_transform(cfg)
samples = []
for index in range(2):
    boxes = torch.tensor([[0.1, 0.2, 0.5, 0.6], [0.4, 0.3, 0.9, 0.8]])
    locations, labels = target_transform(boxes, torch.tensor([3, 7]))
    samples.append((torch.randn(3, 300, 300), dict(boxes=locations, labels=labels), index))
batch = BatchCollator(is_train=True)(samples)
args = SimpleNamespace(use_tensorboard=False, log_step=1, save_step=10**9, eval_step=-1, distributed=False)
model = do_train(cfg, model, [batch], optimizer, scheduler, checkpointer, torch.device("cpu"), {"iteration": 0}, args)
images, targets, _ = batch
smoke_support.succeeded(sum(model(images, targets=targets).values()))
