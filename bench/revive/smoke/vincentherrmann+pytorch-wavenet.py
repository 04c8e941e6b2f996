"""vincentherrmann/pytorch-wavenet: WavenetTrainer.train (as train_script.py builds it, smaller) for one epoch
over two synthetic one-hot audio items; librosa and tensorflow (data preparation and its TensorBoard
logger) stand in when missing."""
import smoke_support

smoke_support.stand_in("librosa", "tensorflow", "scipy.misc")

import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402

from model_logging import Logger  # noqa: E402
from wavenet_model import WaveNetModel  # noqa: E402
from wavenet_training import WavenetTrainer  # noqa: E402


class OneHotAudio(Dataset):
    """What WavenetDataset yields: a one-hot (classes, item_length) input and the next samples' classes."""

    def __init__(self, item_length, target_length, classes=256, items=2):
        generator = torch.Generator().manual_seed(0)
        self.samples = torch.randint(0, classes, (items, item_length + 1), generator=generator)
        self.target_length, self.classes = target_length, classes

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        sample = self.samples[index]
        one_hot = torch.zeros(self.classes, len(sample) - 1)
        one_hot.scatter_(0, sample[:-1].unsqueeze(0), 1.0)
        return one_hot, sample[-self.target_length:]


torch.manual_seed(0)
model = WaveNetModel(layers=4, blocks=2, dilation_channels=8, residual_channels=8, skip_channels=16,
                     end_channels=16, output_length=8, dtype=torch.FloatTensor, bias=True)
data = OneHotAudio(model.receptive_field + model.output_length - 1, model.output_length)
trainer = WavenetTrainer(model=model, dataset=data, lr=0.0001, weight_decay=0.0, snapshot_path=None, logger=Logger(),
                         dtype=torch.FloatTensor, ltype=torch.LongTensor)
trainer.train(batch_size=2, epochs=1)
x, target = data[0]
output = model(x.unsqueeze(0))
smoke_support.succeeded(torch.nn.functional.cross_entropy(output.squeeze(), target.squeeze()))
