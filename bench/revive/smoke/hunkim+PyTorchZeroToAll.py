"""hunkim/PyTorchZeroToAll: 14_2_seq2seq_att.py's train(src, target) for one step of its attention seq2seq
(seq2seq_models.EncoderRNN + AttnDecoderRNN, Adam, CrossEntropyLoss, set up as its __main__ block does) on one
synthetic pair of random ASCII strings, shaped like the (lower-cased, space-less source; original target) pairs
of Shakespeare lines its TextDataset reads."""
import importlib
import random
import string

import smoke_support

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import seq2seq_models as sm  # noqa: E402

att = importlib.import_module("14_2_seq2seq_att")

torch.manual_seed(0)
random.seed(0)
N_CHARS = att.N_CHARS  # ASCII
HIDDEN_SIZE = att.HIDDEN_SIZE
att.encoder = sm.EncoderRNN(N_CHARS, HIDDEN_SIZE, att.N_LAYERS)
att.decoder = sm.AttnDecoderRNN(HIDDEN_SIZE, N_CHARS, att.N_LAYERS)
params = list(att.encoder.parameters()) + list(att.decoder.parameters())
att.optimizer = torch.optim.Adam(params, lr=0.001)
att.criterion = nn.CrossEntropyLoss()

target = "".join(random.choice(string.ascii_letters + " .") for _ in range(12))
src = target.lower().replace(" ", "")
train_loss = att.train(src, target)
smoke_support.succeeded(train_loss)
