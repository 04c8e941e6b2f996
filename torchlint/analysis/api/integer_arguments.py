"""Arguments torch takes as ints only: a float there raises ``TypeError`` (checked against torch 2.13 by
``tests/test_runtime_drift.py``, one call per entry).

Each entry names the API's parameters in positional order and which of them must be ints; ``SIZES`` stands
for ``*size`` (every positional argument is a dimension: ``torch.zeros(2, 3)``, ``x.view(-1, 4)``), and a tuple
or list passed for an int parameter holds ints (``kernel_size=(3, 3)``, ``pad=(1, 1)``).  Tensor methods are
keyed by their name: the receiver need not be shown to be a tensor, as NumPy's ``reshape``/``repeat``/
``transpose`` refuse floats the same way.
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Optional, Tuple

SIZES = "*"


class IntegerArguments:
    """The positional parameter names of an API and those that must be ints."""

    def __init__(self, positional: Tuple[str, ...], integers: FrozenSet[str]) -> None:
        self.positional = positional
        self.integers = integers

    def parameter_at(self, position: int) -> Optional[str]:
        if self.positional == (SIZES,):
            return SIZES
        return self.positional[position] if position < len(self.positional) else None

    def takes_int(self, parameter: Optional[str]) -> bool:
        return parameter == SIZES or parameter in self.integers


def _api(positional: str, integers: Optional[str] = None) -> IntegerArguments:
    names = tuple(positional.split())
    return IntegerArguments(names, frozenset((integers or positional).split()) - {"input"})


_CONV = _api("in_channels out_channels kernel_size stride padding dilation groups", None)
_CONV_TRANSPOSE = _api(
    "in_channels out_channels kernel_size stride padding output_padding groups bias dilation",
    "in_channels out_channels kernel_size stride padding output_padding groups dilation",
)
_POOL = _api("kernel_size stride padding")
_FUNCTIONAL_POOL = _api("input kernel_size stride padding")

BY_FUNCTION: Dict[str, IntegerArguments] = {
    **{f"torch.nn.Conv{n}d": _CONV for n in (1, 2, 3)},
    **{f"torch.nn.ConvTranspose{n}d": _CONV_TRANSPOSE for n in (1, 2, 3)},
    "torch.nn.Linear": _api("in_features out_features"),
    "torch.nn.Bilinear": _api("in1_features in2_features out_features"),
    **{f"torch.nn.BatchNorm{n}d": _api("num_features") for n in (1, 2, 3)},
    "torch.nn.Embedding": _api("num_embeddings embedding_dim"),
    **{f"torch.nn.{kind}": _api("input_size hidden_size num_layers") for kind in ("LSTM", "GRU", "RNN")},
    **{f"torch.nn.{kind}Cell": _api("input_size hidden_size") for kind in ("LSTM", "GRU", "RNN")},
    **{f"torch.nn.{kind}Pool{n}d": _POOL for kind in ("Max", "Avg") for n in (1, 2, 3)},
    **{f"torch.nn.Adaptive{kind}Pool{n}d": _api("output_size") for kind in ("Max", "Avg") for n in (1, 2, 3)},
    "torch.nn.PixelShuffle": _api("upscale_factor"),
    "torch.nn.PixelUnshuffle": _api("downscale_factor"),
    "torch.nn.Upsample": _api("size scale_factor", "size"),
    "torch.nn.MultiheadAttention": _api("embed_dim num_heads", "embed_dim"),
    "torch.nn.functional.interpolate": _api("input size scale_factor", "size"),
    "torch.nn.functional.upsample": _api("input size scale_factor", "size"),
    "torch.nn.functional.pad": _api("input pad", "pad"),
    **{f"torch.nn.functional.{kind}_pool{n}d": _FUNCTIONAL_POOL for kind in ("max", "avg") for n in (1, 2, 3)},
    **{f"torch.nn.functional.adaptive_{kind}_pool{n}d": _api("input output_size") for kind in ("max", "avg") for n in (1, 2, 3)},
    "torch.nn.functional.pixel_shuffle": _api("input upscale_factor"),
    "torch.nn.functional.one_hot": _api("tensor num_classes", "num_classes"),
    **{f"torch.{name}": _api(SIZES) for name in ("zeros", "ones", "empty", "rand", "randn")},
    "torch.full": _api("size fill_value", "size"),
    "torch.eye": _api("n m"),
    "torch.randperm": _api("n"),
    "torch.randint": _api("low high size"),
    "torch.reshape": _api("input shape"),
    "torch.narrow": _api("input dim start length"),
    "torch.chunk": _api("input chunks dim"),
    "torch.split": _api("tensor split_size_or_sections dim", "split_size_or_sections dim"),
    "torch.topk": _api("input k dim"),
    "torch.unsqueeze": _api("input dim"),
    "torch.transpose": _api("input dim0 dim1"),
    "torch.permute": _api("input dims"),
}

BY_METHOD: Dict[str, IntegerArguments] = {
    **{name: _api(SIZES) for name in ("view", "reshape", "expand", "repeat", "permute", "new_zeros", "new_ones", "new_empty")},
    "new_full": _api("size fill_value", "size"),
    "narrow": _api("dim start length"),
    "unfold": _api("dimension size step"),
    "chunk": _api("chunks dim"),
    "split": _api("split_size dim"),
    "topk": _api("k dim"),
    "unsqueeze": _api("dim"),
    "squeeze": _api("dim"),
    "transpose": _api("dim0 dim1"),
    "size": _api("dim"),
}
