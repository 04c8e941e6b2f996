"""dreamgonfly/deep-text-classification-pytorch: the repository's Trainer.run for one epoch of WordCNN (random
embeddings, as main.py builds it with --mode rand) over synthetic token batches; the Trainer stops after the
first batch of epoch 0 on its own."""
import logging
from types import SimpleNamespace

import smoke_support

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.optim import Adam, lr_scheduler  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from models.WordCNN import WordCNN  # noqa: E402
from trainers import Trainer  # noqa: E402

torch.manual_seed(0)
dictionary = SimpleNamespace(vocabulary_size=50, vector_size=16, embedding=None)
model = WordCNN(n_classes=3, dictionary=dictionary, args=SimpleNamespace(mode="rand", kernel_sizes=[3, 4, 5]))
sentences = TensorDataset(torch.randint(0, 50, (8, 12)), torch.randint(0, 3, (8,)))
train_loader = DataLoader(sentences, batch_size=4)
val_loader = DataLoader(sentences, batch_size=4)
optimizer = Adam(params=[p for p in model.parameters() if p.requires_grad], lr=0.001)
plateau = lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.7, patience=5, min_lr=0.0001)
logging.basicConfig(level=logging.INFO)
trainer = Trainer(model, train_loader, val_loader, criterion=nn.CrossEntropyLoss, optimizer=optimizer,
                  lr_schedule=True, lr_scheduler=plateau, use_gpu=False, logger=logging.getLogger("smoke"))
trainer.run(epochs=0)
inputs, targets = sentences[:4]
smoke_support.succeeded(nn.CrossEntropyLoss()(model(inputs), targets))
