"""chnsh/DCRNN_PyTorch: the repository's DCRNNSupervisor built from data/model/dcrnn_la.yaml and the METR-LA sensor
graph it ships (load_graph_data; dual random-walk diffusion on 207 nodes), shrunk to one 8-unit DCGRU layer and
3-step sequences, then its train() for one epoch over synthetic train/val/test .npz files (DCRNNModel with
curriculum learning, masked_mae_loss, Adam, gradient clipping, MultiStepLR, evaluation). tensorflow (the TF
version's helpers in lib.utils), tensorboard and protobuf (behind torch.utils.tensorboard's SummaryWriter) stand
in when missing."""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import tempfile

import smoke_support

smoke_support.stand_in("tensorflow")


class _TreeStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A missing package and every submodule of it as smoke_support's stand-in (torch.utils.tensorboard imports
    many of tensorboard's and protobuf's)."""

    roots = [root for root in ("tensorboard", "google") if importlib.util.find_spec(root) is None]

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = smoke_support._Anything(spec.name)
        module.__path__, module.__version__ = [], "2.20.0"
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(_TreeStandIn())

import numpy as np  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from lib.utils import load_graph_data  # noqa: E402
from model.pytorch.dcrnn_supervisor import DCRNNSupervisor  # noqa: E402

torch.manual_seed(0)
np.random.seed(0)
with open("data/model/dcrnn_la.yaml") as f:
    config = yaml.safe_load(f)
_, _, adj_mx = load_graph_data(config["data"]["graph_pkl_filename"])
work = tempfile.mkdtemp(prefix="revive-dcrnn-")
model = config["model"]
model.update(rnn_units=8, num_rnn_layers=1, seq_len=3, horizon=3)
for split in ("train", "val", "test"):
    shape = (2, model["seq_len"], model["num_nodes"], model["input_dim"])
    np.savez(os.path.join(work, split + ".npz"), x=np.random.rand(*shape) * 60, y=np.random.rand(*shape) * 60)
config["data"].update(dataset_dir=work, batch_size=2, test_batch_size=2, val_batch_size=2)
config["train"].update(epochs=1, save_model=0, log_dir=os.path.join(work, "log"))
supervisor = DCRNNSupervisor(adj_mx=adj_mx, **config)
supervisor.train()
loss, _ = supervisor.evaluate(dataset="train")
smoke_support.succeeded(loss)
