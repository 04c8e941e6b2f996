"""alecjasen/N-BEATS: the generic N-BEATS model configured by experiments/m4/generic.gin (stacks and layer size
shrunk) for M4's Yearly horizon with lookback 2, trained by the repository's experiments.trainer.trainer for two
iterations with its MASE loss on batches its TimeseriesSampler draws from eight synthetic series, with its
SnapshotManager writing to a temporary folder. (The interpretable model's TrendBasis uses np.float, which
today's numpy lacks: a numpy crash, not a torch one, hence the generic model.)"""
import tempfile

import smoke_support

import gin  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from common.sampler import TimeseriesSampler  # noqa: E402
from common.torch.snapshots import SnapshotManager  # noqa: E402
from experiments.model import generic  # noqa: E402
from experiments.trainer import trainer  # noqa: E402

torch.manual_seed(0)
np.random.seed(0)
gin.parse_config_file("experiments/m4/generic.gin", skip_unknown=True)
gin.bind_parameter("generic.stacks", 3)
gin.bind_parameter("generic.layer_size", 64)
gin.bind_parameter("TimeseriesSampler.batch_size", 16)
horizon, lookback, frequency = 6, 2, 1  # M4Meta's Yearly horizon and frequency
series = np.random.rand(8, 40) * 100 + 50
training_set = TimeseriesSampler(timeseries=series, insample_size=lookback * horizon, outsample_size=horizon,
                                 window_sampling_limit=int(1.5 * horizon))
model = generic(input_size=lookback * horizon, output_size=horizon)
snapshots = SnapshotManager(snapshot_dir=tempfile.mkdtemp(prefix="revive-nbeats-"), total_iterations=2)
model = trainer(snapshot_manager=snapshots, model=model, training_set=iter(training_set),
                timeseries_frequency=frequency, loss_name="MASE", iterations=2)
smoke_support.succeeded(snapshots.losses["training"][1])
