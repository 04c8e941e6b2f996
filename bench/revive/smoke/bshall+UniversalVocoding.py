"""bshall/UniversalVocoding: train.py's training loop for one epoch of two batches -- the repository's own
Vocoder and VocoderDataset, Adam + StepLR, and train.py's mixed-precision step (torch.cuda.amp.autocast,
F.cross_entropy, torch.cuda.amp.GradScaler scale/step/update) -- with config.yaml's preprocess settings
(80 mels, hop 200, 10 bits, 24 sample frames) and a shrunken model, over synthetic mu-law audio and log-Mel
files written to a temporary dataset folder in preprocess.py's layout (train.json, *.wav.npy, *.mel.npy).
train.py's train_model itself cannot run here: it moves the model and batches to the GPU unconditionally and
needs hydra and tensorboard, so its loop body is repeated here statement for statement (on the CPU).
librosa, omegaconf and importlib_resources, which univoc/model.py imports for generation and from_pretrained
only, stand in when missing."""
import json
import os
import tempfile
from pathlib import Path

import smoke_support

smoke_support.stand_in("librosa", "omegaconf", "importlib_resources")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.cuda.amp as amp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.optim as optim  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from univoc import Vocoder, VocoderDataset  # noqa: E402

torch.manual_seed(0)
np.random.seed(0)

# univoc/config/config.yaml, with the model's sizes shrunk
preprocess = {"sr": 16000, "hop_length": 200, "n_mels": 80, "bits": 10}
model_cfg = dict(n_mels=80, conditioning_size=16, embedding_dim=16, rnn_size=32, fc_size=32, bits=10,
                 hop_length=200, sr=16000)
train_cfg = {"batch_size": 2, "sample_frames": 24, "lr": 4e-4, "step_size": 25000, "gamma": 0.5,
             "n_workers": 0}

# a dataset folder as preprocess.py writes it
dataset_root = Path(tempfile.mkdtemp(prefix="revive-univoc-"))
metadata = []
for k in range(4):
    out_path = Path("wavs") / f"utt{k}"
    (dataset_root / out_path).parent.mkdir(parents=True, exist_ok=True)
    frames = 40
    logmel = np.random.uniform(-1.0, 0.0, size=(preprocess["n_mels"], frames)).astype(np.float32)
    wav = np.random.randint(0, 2 ** preprocess["bits"], size=frames * preprocess["hop_length"] + 1)
    np.save((dataset_root / out_path).with_suffix(".mel.npy"), logmel)
    np.save((dataset_root / out_path).with_suffix(".wav.npy"), wav)
    metadata.append([f"LJSpeech/utt{k}", str(out_path)])
with open(dataset_root / "train.json", "w") as file:
    json.dump(metadata, file)

# train.py: train_model, on the CPU
vocoder = Vocoder(**model_cfg)
optimizer = optim.Adam(vocoder.parameters(), lr=train_cfg["lr"])
scheduler = optim.lr_scheduler.StepLR(optimizer, train_cfg["step_size"], train_cfg["gamma"])
scaler = amp.GradScaler()

dataset = VocoderDataset(dataset_root, sample_frames=train_cfg["sample_frames"],
                         hop_length=preprocess["hop_length"])
dataloader = DataLoader(dataset, batch_size=train_cfg["batch_size"], shuffle=True,
                        num_workers=train_cfg["n_workers"], pin_memory=False, drop_last=True)

global_step = 0
average_loss = 0
for i, (audio, mels) in enumerate(dataloader, 1):
    optimizer.zero_grad()

    with amp.autocast():
        wav = vocoder(audio[:, :-1], mels)
        loss = F.cross_entropy(wav.transpose(1, 2), audio[:, 1:])

    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()

    global_step += 1
    average_loss += (loss.item() - average_loss) / i

print(f"epoch:1, loss:{average_loss:.3f}, {scheduler.get_last_lr()}, steps:{global_step}")
smoke_support.succeeded(loss)
