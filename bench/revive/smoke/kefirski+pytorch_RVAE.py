"""kefirski/pytorch_RVAE: the repository's RVAE (its Parameters' sizes, a tiny vocabulary) and the train step that
RVAE.trainer returns, as train.py calls it for iteration 0 (batch 4, dropout 0.3, no CUDA), fed by a small
synthetic batch loader whose next_batch gives BatchLoader.next_batch's five index arrays (random word and character
ids of the right shapes); the word embeddings file that Embedding loads from data/word_embeddings.npy (made by
train_word_embeddings.py) is a random one written to a temporary working directory."""
import os
import tempfile

import smoke_support

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.optim import Adam  # noqa: E402

from model.rvae import RVAE  # noqa: E402
from utils.parameters import Parameters  # noqa: E402

WORDS, CHARS, MAX_WORD_LEN, MAX_SEQ_LEN = 30, 20, 8, 6


class SyntheticBatches:
    """BatchLoader.next_batch's outputs: encoder words [B, L], encoder chars [B, L, W], decoder words [B, L+1],
    decoder chars [B, L+1, W], targets [B, L+1]."""

    def next_batch(self, batch_size, target_str):
        rng = np.random.RandomState(0 if target_str == "train" else 1)
        length = MAX_SEQ_LEN - 1
        return (rng.randint(0, WORDS, (batch_size, length)),
                rng.randint(0, CHARS, (batch_size, length, MAX_WORD_LEN)),
                rng.randint(0, WORDS, (batch_size, length + 1)),
                rng.randint(0, CHARS, (batch_size, length + 1, MAX_WORD_LEN)),
                rng.randint(0, WORDS, (batch_size, length + 1)))


torch.manual_seed(0)
np.random.seed(0)
workdir = tempfile.mkdtemp(prefix="revive-rvae-")
os.makedirs(os.path.join(workdir, "data"))
parameters = Parameters(MAX_WORD_LEN, MAX_SEQ_LEN, WORDS, CHARS)
np.save(os.path.join(workdir, "data", "word_embeddings.npy"),
        np.random.randn(WORDS, parameters.word_embed_size).astype(np.float32))
os.chdir(workdir)

rvae = RVAE(parameters)
optimizer = Adam(rvae.learnable_parameters(), 0.00005)
batch_loader = SyntheticBatches()
train_step = rvae.trainer(optimizer, batch_loader)
cross_entropy, kld, coef = train_step(0, 4, False, 0.3)
smoke_support.succeeded(79 * cross_entropy + coef * kld)
