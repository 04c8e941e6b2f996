"""seungwonpark/melgan: one generator step and one discriminator step of utils/train.py's loop, written out
as the loop writes them (its train() moves the models to .cuda() unconditionally and swallows every exception),
on the repository's Generator and MultiScaleDiscriminator built from config/default.yaml's hyperparameters,
over a synthetic batch of 2 mel segments of 8 frames (2048 audio samples, the hop of 256 kept)."""
import smoke_support

import torch  # noqa: E402

from model.generator import Generator  # noqa: E402
from model.multiscale import MultiScaleDiscriminator  # noqa: E402
from utils.hparams import HParam  # noqa: E402

torch.manual_seed(0)
hp = HParam("config/default.yaml")
hp.audio.segment_length = 8 * hp.audio.hop_length  # 2048 samples instead of 16000, to stay small
mel_frames = hp.audio.segment_length // hp.audio.hop_length

model_g = Generator(hp.audio.n_mel_channels)
model_d = MultiScaleDiscriminator()
optim_g = torch.optim.Adam(model_g.parameters(),
    lr=hp.train.adam.lr, betas=(hp.train.adam.beta1, hp.train.adam.beta2))
optim_d = torch.optim.Adam(model_d.parameters(),
    lr=hp.train.adam.lr, betas=(hp.train.adam.beta1, hp.train.adam.beta2))
model_g.train()
model_d.train()

melG = torch.randn(2, hp.audio.n_mel_channels, mel_frames) - 5.0
audioG = 0.1 * torch.randn(2, 1, hp.audio.segment_length)
melD = torch.randn(2, hp.audio.n_mel_channels, mel_frames) - 5.0
audioD = 0.1 * torch.randn(2, 1, hp.audio.segment_length)

# generator (utils/train.py's loop body)
optim_g.zero_grad()
fake_audio = model_g(melG)[:, :, :hp.audio.segment_length]
disc_fake = model_d(fake_audio)
disc_real = model_d(audioG)
loss_g = 0.0
for (feats_fake, score_fake), (feats_real, _) in zip(disc_fake, disc_real):
    loss_g += torch.mean(torch.sum(torch.pow(score_fake - 1.0, 2), dim=[1, 2]))
    for feat_f, feat_r in zip(feats_fake, feats_real):
        loss_g += hp.model.feat_match * torch.mean(torch.abs(feat_f - feat_r))
loss_g.backward()
optim_g.step()

# discriminator
fake_audio = model_g(melD)[:, :, :hp.audio.segment_length]
fake_audio = fake_audio.detach()
loss_d_sum = 0.0
for _ in range(hp.train.rep_discriminator):
    optim_d.zero_grad()
    disc_fake = model_d(fake_audio)
    disc_real = model_d(audioD)
    loss_d = 0.0
    for (_, score_fake), (_, score_real) in zip(disc_fake, disc_real):
        loss_d += torch.mean(torch.sum(torch.pow(score_real - 1.0, 2), dim=[1, 2]))
        loss_d += torch.mean(torch.sum(torch.pow(score_fake, 2), dim=[1, 2]))
    loss_d.backward()
    optim_d.step()
    loss_d_sum += loss_d

print("loss_g %.4f loss_d %.4f" % (loss_g.item(), (loss_d_sum / hp.train.rep_discriminator).item()))
smoke_support.succeeded(loss_g)
