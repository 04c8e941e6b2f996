"""chenxijun1029/DeepFM_with_PyTorch: DeepFM.fit for one epoch over two synthetic batches of Criteo-like
fields (indices and values), as main.py calls it."""
import smoke_support

import torch  # noqa: E402
import torch.optim as optim  # noqa: E402

from model.DeepFM import DeepFM  # noqa: E402

torch.manual_seed(0)
feature_sizes = [10, 7, 5, 12]
batches = []
for _ in range(2):
    xi = torch.stack([torch.randint(0, size, (8, 1)) for size in feature_sizes], dim=1)
    xv = torch.rand(8, len(feature_sizes))
    y = torch.randint(0, 2, (8,)).float()
    batches.append((xi, xv, y))
model = DeepFM(feature_sizes, use_cuda=False)
optimizer = optim.Adam(model.parameters(), lr=1e-4, weight_decay=0.0)
model.fit(batches, batches, optimizer, epochs=1, verbose=False)
xi, xv, y = batches[0]
smoke_support.succeeded(torch.nn.functional.binary_cross_entropy_with_logits(model(xi, xv), y))
