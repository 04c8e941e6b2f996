"""spro/practical-pytorch, char-rnn-classification: the tutorial's own train.py script (what `python train.py`
runs in that folder: its RNN, NLLLoss, SGD and the module-level training loop over random (category, name)
pairs), run by importing it, on synthetic names. Its data.py reads ../data/names/*.txt at import; the smoke
imports it from an empty folder so that it finds no files, then fills its category table with three
categories of random letter strings before train.py starts."""
import os
import random
import sys
import tempfile

import smoke_support

import torch  # noqa: E402

FOLDER = os.path.join(os.getcwd(), "char-rnn-classification")
sys.path.insert(0, FOLDER)  # `python train.py` puts the script's folder first on sys.path

empty = os.path.join(tempfile.mkdtemp(prefix="revive-names-"), "cwd")
os.makedirs(empty)
os.chdir(empty)  # data.py's glob('../data/names/*.txt') finds nothing here
import data  # noqa: E402
os.chdir(FOLDER)

random.seed(0)
torch.manual_seed(0)
for category in ("Alpha", "Beta", "Gamma"):
    data.all_categories.append(category)
    data.category_lines[category] = [
        "".join(random.choice(data.all_letters[:52]) for _ in range(random.randint(3, 8))) for _ in range(5)]
data.n_categories = len(data.all_categories)

import train  # noqa: E402  (runs the tutorial's training loop)

category, line, category_tensor, line_tensor = train.randomTrainingPair()
output, loss = train.train(category_tensor, line_tensor)
smoke_support.succeeded(loss)
