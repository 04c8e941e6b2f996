"""mttk/rnn-classifier: the repository's train() for one epoch of two synthetic batches, then evaluate(), with
the model main() builds (embedding with max_norm=1, bidirectional GRU encoder, dot-product attention, linear
classifier) and run.sh's settings at tiny sizes; the batches are (T, B) token tensors with lengths and labels,
the way its torchtext BucketIterator yields them. torchtext, which only loads the corpora and GloVe vectors,
stands in when missing."""
import smoke_support

smoke_support.stand_in("torchtext.vocab")

from types import SimpleNamespace  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import train as rnn_train  # noqa: E402
from model import Attention, Classifier, Encoder  # noqa: E402


class Batches(list):
    """A list of torchtext-like batches with the .dataset the repository's train() reports accuracy over."""

    def __init__(self, batches):
        super().__init__(batches)
        self.dataset = [None] * sum(len(b.label) for b in batches)


rnn_train.seed_everything(seed=1337)
args = SimpleNamespace(data="SST", model="GRU", emsize=16, hidden=12, nlayers=2, lr=0.0003, clip=0.25, epochs=1,
                       batch_size=4, drop=0.6, bi=True, cuda=False, fine=False, nlabels=2)
ntokens, seq_len = 40, 9
embedding = nn.Embedding(ntokens, args.emsize, padding_idx=1, max_norm=1)
encoder = Encoder(args.emsize, args.hidden, nlayers=args.nlayers, dropout=args.drop, bidirectional=args.bi,
                  rnn_type=args.model)
attention_dim = args.hidden if not args.bi else 2 * args.hidden
attention = Attention(attention_dim, attention_dim, attention_dim)
model = Classifier(embedding, encoder, attention, attention_dim, args.nlabels)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), args.lr, amsgrad=True)
data = Batches([SimpleNamespace(text=(torch.randint(2, ntokens, (seq_len, args.batch_size)),
                                      torch.full((args.batch_size,), seq_len)),
                                label=torch.randint(0, args.nlabels, (args.batch_size,))) for _ in range(2)])
rnn_train.train(model, data, optimizer, criterion, args)
loss = rnn_train.evaluate(model, data, optimizer, criterion, args)
smoke_support.succeeded(loss)
