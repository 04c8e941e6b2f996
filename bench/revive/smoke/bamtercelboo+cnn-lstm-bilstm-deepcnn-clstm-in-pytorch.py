"""bamtercelboo/cnn-lstm-bilstm-deepcnn-clstm-in-pytorch: the repository's train_ALL_LSTM.train for one epoch of
the model its shipped Config/config.cfg selects (BiGRU), built as main.py's load_model builds it from the
repository's Configurable (read from a copy of config.cfg with cuda, the pretrained embedding file -- absent
from the snapshot -- and the sizes turned down), with main.py's update_arguments settings; the torchtext
iterators main.py builds are replaced by synthetic batches of the same layout (text: seq_len x batch token
ids, label: 1-based class ids as torchtext's label vocabulary gives them, batch_size). test_interval=1 makes
train() also run its own dev/test eval after the step."""
import os
import tempfile
from types import SimpleNamespace

import smoke_support

import torch  # noqa: E402

import Config.config as configurable  # noqa: E402
import train_ALL_LSTM  # noqa: E402
from models.model_BiGRU import BiGRU  # noqa: E402

torch.manual_seed(0)
cfg = configurable.myconf()
cfg.read("./Config/config.cfg")
for section, key, value in [("Data", "word_Embedding", "False"), ("Train", "cuda", "False"),
                            ("Train", "epochs", "1"), ("Train", "log_interval", "1"),
                            ("Train", "test_interval", "1"), ("Train", "save_interval", "1000000"),
                            ("Model", "embed_dim", "16"), ("Model", "lstm_hidden_dim", "8"),
                            ("Model", "kernel_num", "4")]:
    cfg.set(section, key, value)
tmpdir = tempfile.mkdtemp(prefix="revive-bamtercelboo-")
cfg_path = os.path.join(tmpdir, "config.cfg")
with open(cfg_path, "w") as f:
    cfg.write(f)
config = configurable.Configurable(config_file=cfg_path)

VOCAB, CLASSES, SEQ, BATCH = 30, 2, 7, 4
# main.py's update_arguments (torchtext vocabularies: <unk>=0, <pad>=1; the label vocabulary has <unk> too)
config.lr = config.learning_rate
config.init_weight_decay = config.weight_decay
config.init_clip_max_norm = config.clip_max_norm
config.embed_num = VOCAB
config.class_num = CLASSES
config.paddingId = 1
config.unkId = 0
config.save_dir = os.path.join(tmpdir, "snapshot")


class SyntheticIterator:
    """Stands in for torchtext's data.Iterator: fresh batches of (seq_len, batch) token ids and 1-based labels."""

    def __init__(self, n_batches):
        self.n_batches = n_batches
        self.dataset = list(range(n_batches * BATCH))

    def __iter__(self):
        for _ in range(self.n_batches):
            yield SimpleNamespace(text=torch.randint(2, VOCAB, (SEQ, BATCH)),
                                  label=torch.randint(1, CLASSES + 1, (BATCH,)), batch_size=BATCH)


assert config.BiGRU is True
model = BiGRU(config)
train_ALL_LSTM.train(SyntheticIterator(1), SyntheticIterator(1), SyntheticIterator(1), model, config)

model.train()
batch = next(iter(SyntheticIterator(1)))
smoke_support.succeeded(torch.nn.functional.cross_entropy(model(batch.text), batch.label - 1))
