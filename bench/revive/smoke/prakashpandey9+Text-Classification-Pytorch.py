"""prakashpandey9/Text-Classification-Pytorch: one training step of the repository's CNN text classifier
(models/CNN.py) on a synthetic batch of token ids, as main.py's train_model does it: F.cross_entropy, Adam over
the parameters that require grad, main.py's gradient clamp (clip_value 1e-1), optimizer step. main.py itself
cannot be imported (it loads IMDB and GloVe through torchtext at import time) and its train_model, like the
LSTM/RNN/attention models' forward, calls .cuda() unconditionally; the CNN model is the one that runs on a CPU.
The frozen embedding table stands in for GloVe vectors with torch.randn."""
import smoke_support

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from models.CNN import CNN  # noqa: E402

torch.manual_seed(0)
batch_size, vocab_size, embedding_length, seq_len = 4, 50, 16, 20
word_embeddings = torch.randn(vocab_size, embedding_length)
model = CNN(batch_size, output_size=2, in_channels=1, out_channels=8, kernel_heights=[3, 4, 5], stride=1, padding=0,
            keep_probab=0.5, vocab_size=vocab_size, embedding_length=embedding_length, weights=word_embeddings)
optim = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
model.train()
text = torch.randint(0, vocab_size, (batch_size, seq_len))
target = torch.randint(0, 2, (batch_size,)).long()
optim.zero_grad()
prediction = model(text)
loss = F.cross_entropy(prediction, target)
loss.backward()
for p in filter(lambda p: p.grad is not None, model.parameters()):  # main.py's clip_gradient(model, 1e-1)
    p.grad.data.clamp_(-1e-1, 1e-1)
optim.step()
smoke_support.succeeded(loss)
