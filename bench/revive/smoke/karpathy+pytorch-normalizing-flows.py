"""karpathy/pytorch-normalizing-flows: the notebook's RealNVP-style model (AffineHalfFlow), one maximum-likelihood
step on a synthetic 2-D batch, and the spline flow NSF_CL likewise."""
import smoke_support

import torch  # noqa: E402
from torch.distributions import MultivariateNormal  # noqa: E402

from nflib.flows import AffineHalfFlow, NormalizingFlowModel  # noqa: E402
from nflib.spline_flows import NSF_CL  # noqa: E402

torch.manual_seed(0)
prior = MultivariateNormal(torch.zeros(2), torch.eye(2))
x = torch.randn(64, 2)
total = 0.0
for flows in ([AffineHalfFlow(dim=2, parity=i % 2) for i in range(4)], [NSF_CL(dim=2, K=8, B=3, hidden_dim=16) for _ in range(2)]):
    model = NormalizingFlowModel(prior, flows)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=1e-5)
    zs, prior_logprob, log_det = model(x)
    loss = -torch.sum(prior_logprob + log_det)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total += loss.item()
smoke_support.succeeded(total)
