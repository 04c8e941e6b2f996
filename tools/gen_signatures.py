"""Generate torchlint/data/torch_signatures.json from the installed torch.

    python tools/gen_signatures.py            # rewrite the table
    python tools/gen_signatures.py --check    # exit 1 if the table is stale

The table lists, for the most used torch / torch.nn / torch.nn.functional /
torch.utils.data / torch.optim APIs and torch.Tensor methods (``torch.Tensor.backward``),
the keyword names each accepts, and keywords torch renamed (``retain_variables``).  The
linter reads it (TL405, unknown-torch-keyword) and never imports torch itself.

Python-level APIs are read with ``inspect.signature``.  Built-in (C++) functions
have no signature object: their names come from the documented signatures in
the docstring, united with the argument names of their ATen schemas (``self``
is spelled ``input`` in Python) and the NumPy spellings the Python argument
parser also accepts (``axis``, ``keepdims``, ``x1``...).  The union errs on the
side of accepting a keyword: a name missing from the table would be a false
report.  APIs that take ``**kwargs`` are left out (any keyword may be valid),
except where torch documents where the keywords go: ``torch.load`` forwards
them to ``pickle.Unpickler``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pickle
import re
import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Set

from doc_signatures import documented_keywords, schema_keywords

OUTPUT = Path(__file__).resolve().parent.parent / "torchlint" / "data" / "torch_signatures.json"

NN_MODULES = """
Linear Bilinear Identity LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d RMSNorm
Embedding EmbeddingBag Dropout Dropout1d Dropout2d Dropout3d AlphaDropout
ReLU ReLU6 LeakyReLU PReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Softplus Softsign Hardtanh Hardswish Hardsigmoid
Softmax LogSoftmax Softmin Threshold
MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d
AdaptiveMaxPool1d AdaptiveMaxPool2d Upsample PixelShuffle Flatten Unflatten ZeroPad2d ConstantPad2d ReflectionPad2d
MultiheadAttention Transformer TransformerEncoder TransformerEncoderLayer TransformerDecoder TransformerDecoderLayer
RNN LSTM GRU RNNCell LSTMCell GRUCell Sequential ModuleList ModuleDict ParameterList ParameterDict Parameter
CrossEntropyLoss NLLLoss MSELoss L1Loss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss KLDivLoss CosineEmbeddingLoss
MarginRankingLoss TripletMarginLoss CTCLoss MultiLabelSoftMarginLoss HingeEmbeddingLoss PoissonNLLLoss GaussianNLLLoss
CosineSimilarity PairwiseDistance
"""

FUNCTIONAL = """
cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits
kl_div cosine_embedding_loss margin_ranking_loss triplet_margin_loss ctc_loss poisson_nll_loss gaussian_nll_loss
softmax log_softmax softmin gumbel_softmax relu relu6 leaky_relu elu selu celu gelu silu mish sigmoid tanh softplus
hardtanh hardswish glu logsigmoid dropout dropout1d dropout2d dropout3d alpha_dropout
linear bilinear conv1d conv2d conv3d conv_transpose1d conv_transpose2d embedding one_hot pad interpolate upsample
grid_sample affine_grid normalize layer_norm group_norm batch_norm instance_norm rms_norm cosine_similarity
pairwise_distance pdist max_pool1d max_pool2d avg_pool1d avg_pool2d adaptive_avg_pool1d adaptive_avg_pool2d
adaptive_max_pool2d scaled_dot_product_attention multi_head_attention_forward unfold fold pixel_shuffle
"""

TORCH = """
load save tensor as_tensor from_numpy zeros ones empty full rand randn randint randperm arange linspace logspace eye
zeros_like ones_like empty_like full_like rand_like randn_like randint_like manual_seed
cat concat stack split chunk where clamp clip matmul bmm einsum softmax log_softmax sigmoid tanh exp log sqrt
sum mean std var max min argmax argmin topk sort argsort cumsum norm allclose isclose cdist
no_grad enable_grad inference_mode set_grad_enabled autocast compile
"""

OTHER = {
    "torch.utils.data": "DataLoader TensorDataset Subset ConcatDataset random_split RandomSampler SequentialSampler "
    "BatchSampler WeightedRandomSampler SubsetRandomSampler default_collate get_worker_info",
    "torch.utils.data.distributed": "DistributedSampler",
    "torch.optim": "SGD Adam AdamW Adagrad Adadelta Adamax RMSprop RAdam NAdam LBFGS Rprop SparseAdam",
    "torch.optim.lr_scheduler": "StepLR MultiStepLR ExponentialLR CosineAnnealingLR CosineAnnealingWarmRestarts "
    "LambdaLR MultiplicativeLR OneCycleLR CyclicLR ReduceLROnPlateau LinearLR ConstantLR SequentialLR PolynomialLR ChainedScheduler",
    "torch.nn.utils": "clip_grad_norm_ clip_grad_value_ parameters_to_vector vector_to_parameters",
    "torch.nn.utils.rnn": "pad_sequence pack_padded_sequence pad_packed_sequence pack_sequence",
    "torch.nn.init": "uniform_ normal_ constant_ ones_ zeros_ eye_ xavier_uniform_ xavier_normal_ kaiming_uniform_ "
    "kaiming_normal_ trunc_normal_ orthogonal_",
    "torch.amp": "GradScaler autocast",
    "torch.cuda.amp": "GradScaler autocast",
    "torch.autograd": "grad backward set_detect_anomaly detect_anomaly",
    "torch.serialization": "load save",
    "torch.hub": "load_state_dict_from_url",
    "torch.distributed": "init_process_group",
    "torch.nn.parallel": "DistributedDataParallel DataParallel",
}

# Methods of torch.Tensor, listed as ``torch.Tensor.<name>``: checked where the receiver is known to be a tensor.
TENSOR_METHODS = """
backward register_hook retain_grad requires_grad_ detach to cuda cpu type float double half bfloat16 long int bool
view view_as reshape reshape_as squeeze unsqueeze flatten unflatten permute transpose expand expand_as repeat contiguous
sum mean std var max min amax amin argmax argmin prod cumsum norm any all topk sort argsort
softmax log_softmax sigmoid clamp clamp_ clip clip_ masked_fill masked_fill_ where gather scatter scatter_ scatter_add_
index_select index_fill_ index_add_ chunk split narrow flip roll
add add_ sub sub_ mul mul_ div div_ pow matmul mm bmm
new_zeros new_ones new_full new_empty new_tensor fill_ zero_ copy_ uniform_ normal_ bernoulli_
"""
# Keywords torch once took and later renamed: the message names the new one (and the fix writes it).
RENAMED = {
    "torch.Tensor.backward": {"retain_variables": "retain_graph"},
    "torch.autograd.backward": {"retain_variables": "retain_graph"},
    "torch.autograd.grad": {"retain_variables": "retain_graph"},
}

# Where an API's **kwargs go, when torch says so.
FORWARDED: Dict[str, Callable] = {
    "torch.load": pickle._Unpickler.__init__,  # type: ignore[attr-defined]
    "torch.serialization.load": pickle._Unpickler.__init__,  # type: ignore[attr-defined]
}

# Spellings the Python argument parser of built-in functions accepts besides the schema's.
NUMPY_ALIASES = {"dim": ("axis",), "keepdim": ("keepdims",), "input": ("x", "a", "x1"), "other": ("x2",)}
FACTORY_EXTRAS = ("requires_grad", "pin_memory", "out", "names", "memory_format")


def _signature_keywords(obj) -> Optional[Set[str]]:
    """Keyword names from inspect, or None when the API takes **kwargs (anything goes)."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    signature = inspect.signature(target)
    names: Set[str] = set()
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            return None
        if parameter.kind is parameter.VAR_POSITIONAL or parameter.name == "self":
            continue
        names.add(parameter.name)
    return names


def _builtin_keywords(obj, name: str) -> Set[str]:
    names = documented_keywords(name, obj.__doc__ or "") | schema_keywords(name)
    if {"dtype", "device"} <= names:
        names.update(FACTORY_EXTRAS)
    for canonical, aliases in NUMPY_ALIASES.items():
        if canonical in names:
            names.update(aliases)
    return names


def _keywords(qualified: str, obj) -> Optional[Set[str]]:
    try:
        names = _signature_keywords(obj)
    except (TypeError, ValueError):
        names = _builtin_keywords(obj, qualified.rsplit(".", 1)[1])
        if not names:
            raise LookupError(f"no signature found for {qualified}")
        return names
    if names is None and qualified in FORWARDED:
        forwarded = inspect.signature(FORWARDED[qualified]).parameters.values()
        return _signature_keywords_allowing_kwargs(obj) | {p.name for p in forwarded if p.kind is p.KEYWORD_ONLY}
    return names


def _signature_keywords_allowing_kwargs(obj) -> Set[str]:
    signature = inspect.signature(obj)
    return {
        p.name
        for p in signature.parameters.values()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"
    }


def _tensor_method_keywords(name: str) -> Optional[Set[str]]:
    """The keywords ``torch.Tensor.<name>`` accepts, or None when it takes any (a made-up keyword gets no
    TypeError naming it) or it cannot be told: methods are checked against torch itself, not only read."""
    import torch

    method = getattr(torch.Tensor, name)
    try:
        names = _signature_keywords(method)
    except (TypeError, ValueError):
        names = _builtin_keywords(method, name) or None
    if names is None:
        return None
    receiver = torch.ones(2, 2, requires_grad=name in ("backward", "register_hook", "retain_grad"))
    made_up = "surely_not_a_keyword"
    try:
        getattr(receiver.clone() if name.endswith("_") else receiver, name)(**{made_up: 1})
    except TypeError as error:
        if made_up not in str(error):
            return None
    except Exception:  # noqa: BLE001  another error first (arguments missing): the keyword may be swallowed
        return None
    else:
        return None
    return names


def _public_names() -> Iterable[str]:
    for name in TORCH.split():
        yield f"torch.{name}"
    for name in NN_MODULES.split():
        yield f"torch.nn.{name}"
    for name in FUNCTIONAL.split():
        yield f"torch.nn.functional.{name}"
    for module, names in OTHER.items():
        for name in names.split():
            yield f"{module}.{name}"


def _resolve(qualified: str):
    module_name, _, attr = qualified.rpartition(".")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def build() -> dict:
    import torch

    apis: Dict[str, List[str]] = {}
    aliases: Dict[str, str] = {}
    open_apis: List[str] = []
    for qualified in _public_names():
        try:
            obj = _resolve(qualified)
        except (ImportError, AttributeError):
            continue  # not in this torch
        names = _keywords(qualified, obj)
        if names is None:
            open_apis.append(qualified)
            continue
        apis[qualified] = sorted(names)
        # The defining module's path, for `from torch.nn.modules.linear import Linear`.
        home = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        if home != qualified and re.fullmatch(r"torch(\.\w+)+", home) and home not in apis:
            aliases.setdefault(home, qualified)
    for name in TENSOR_METHODS.split():
        keywords = _tensor_method_keywords(name)
        if keywords is None:
            open_apis.append(f"torch.Tensor.{name}")
        else:
            apis[f"torch.Tensor.{name}"] = sorted(keywords)
    for alias in list(aliases):
        if alias in apis:
            del aliases[alias]
    return {
        "torch_version": torch.__version__.split("+")[0],
        "generated_by": "tools/gen_signatures.py",
        "note": "keyword names accepted by each API; APIs taking **kwargs are listed under open_apis and never checked",
        "apis": dict(sorted(apis.items())),
        "aliases": dict(sorted(aliases.items())),
        "open_apis": sorted(open_apis),
        "renamed": {api: dict(sorted(names.items())) for api, names in sorted(RENAMED.items())},
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the stored table differs from a fresh one")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = json.dumps(build(), indent=1, sort_keys=False) + "\n"
    if args.check:
        stale = not args.output.exists() or args.output.read_text(encoding="utf-8") != text
        print(f"{args.output}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
