"""dragen1860/Reptile-Pytorch: one meta-training step of the repository's MetaLearner (meta.py) over its Naive
omniglot network (naive.py), 5-way 1-shot with main.py's settings (meta lr 1e-3, 5 inner updates, 28x28 images
repeated to 3 channels), on a synthetic meta-batch of 2 episodes shaped as main.py feeds it; main.py's own loop
calls .cuda() unconditionally, so the MetaLearner is called directly as that loop calls it (its forward runs the
inner SGD updates, the summed meta-gradient and the Adam step)."""
import smoke_support

import torch  # noqa: E402

from meta import MetaLearner  # noqa: E402
from naive import Naive  # noqa: E402

torch.manual_seed(0)
meta_batchsz, n_way, k_shot, imgsz = 2, 5, 1, 28
k_query = k_shot
meta = MetaLearner(Naive, (n_way, imgsz), n_way=n_way, k_shot=k_shot, meta_batchsz=meta_batchsz, beta=1e-3,
                   num_updates=5)
support_x = torch.randn(meta_batchsz, n_way * k_shot, 28, 28, 1).transpose(2, 4).transpose(3, 4).repeat(1, 1, 3, 1, 1)
query_x = torch.randn(meta_batchsz, n_way * k_query, 28, 28, 1).transpose(2, 4).transpose(3, 4).repeat(1, 1, 3, 1, 1)
support_y = torch.arange(n_way).repeat_interleave(k_shot).repeat(meta_batchsz, 1)
query_y = torch.arange(n_way).repeat_interleave(k_query).repeat(meta_batchsz, 1)
accs = meta(support_x, support_y, query_x, query_y)
loss, _ = meta.learner.net_forward(query_x[0], query_y[0])
smoke_support.succeeded(loss)
