"""The checks of the traced process: the site probes, and a watch over every torch op (imports torch).

``activate`` runs once torch is imported by the program.  It gives the instrumented code's probes
their checks (:class:`SiteChecks`) and starts the watch (:class:`Watch`, a ``TorchFunctionMode``):

- a site probe measures its operand against the op's edge (``<= 0`` under a root or log, a divisor
  at 0, ...) and, through a hook on the op's backward node, whether the gradient the op produced was
  Inf/NaN while the gradient it received was finite;
- the watch sums the output of every torch call that can create a non-finite value from finite
  inputs (views, selections, comparisons and activations that stay finite are let through) and, at
  each backward call, hooks the graph's nodes to see each gradient they produce.  The first output or
  gradient that is non-finite while its inputs were finite is the first non-finite value; only then
  does it look for the program's frame (the first one in a project file) to name its line.  After it
  the watch stops checking, so the rest of the run pays only for passing calls through;
- optimizer steps (global step hooks) are counted, run unwatched, and followed by one check of the
  parameters they changed.  ``--max-steps`` and ``--stop-on-first`` end the run from here.

Checks only read values: a sum, a minimum, a count of entries at the edge, on a detached tensor.  On
the CPU they are read at once (a sum; the exact test only when it is not finite).  On other devices
reading a value would wait for the device at every op, so a check is the tensor's least and greatest
entry (one reduction in its own dtype, finite exactly when every entry is), kept on the device; every
``sync_every`` checks they are copied off it without waiting, and read once they have arrived, in order,
and all at exit (``TORCHLINT_TRACE_DEFERRED=1`` takes that path on the CPU too; the tests use it).
"""
from __future__ import annotations

import bisect
import collections
import math
import os
import sys
import warnings
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.overrides import TorchFunctionMode

from torchlint.trace import plan as edges
from torchlint.trace.plan import Plan
from torchlint.trace.state import (
    PAIRED_EDGES,
    STOPPED_FIRST_NONFINITE,
    STOPPED_MAX_STEPS,
    Probes,
    Recorder,
    SiteRecord,
    TraceStopped,
)

Tensor = torch.Tensor
# The checks' own torch calls must not pass through the watch (nor any mode of the program's).
_unwatched = torch._C.DisableTorchFunction
_FORCE_DEFERRED = os.environ.get("TORCHLINT_TRACE_DEFERRED") == "1"
# Forward records kept for naming the line of a gradient's op (oldest dropped beyond this).
_FORWARD_RECORDS = 200_000
# A frame not looked up yet (None is a lookup that found no project frame).
_UNSEEN = object()

# Calls whose output cannot be non-finite when their inputs are finite, nor NaN when they hold no NaN:
# shape steps, selections, comparisons, copies, factories of finite or uninitialised values, activations
# bounded by construction.  (Not softmax, nor dropout: an all -inf row, or 0 * inf, makes NaN.)
_PASSTHROUGH_NAMES = (
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "squeeze_", "unsqueeze",
    "unsqueeze_", "permute", "transpose", "transpose_", "t", "t_", "swapaxes", "swapdims", "movedim",
    "moveaxis", "expand", "expand_as", "contiguous", "narrow", "select", "split", "split_with_sizes",
    "tensor_split", "chunk", "unbind", "__getitem__", "__setitem__", "index_select", "gather", "take",
    "take_along_dim", "masked_select", "masked_fill", "masked_fill_", "index_fill", "index_fill_", "scatter",
    "scatter_", "repeat", "repeat_interleave", "tile", "flip", "fliplr", "flipud", "roll", "rot90",
    "diagonal", "diag_embed", "tril", "triu", "tril_", "triu_", "clone", "detach", "detach_", "requires_grad_",
    "retain_grad", "cpu", "cuda", "pin_memory", "as_strided", "unfold", "broadcast_to", "broadcast_tensors",
    "atleast_1d", "atleast_2d", "atleast_3d", "ravel", "cat", "concat", "concatenate", "stack", "hstack",
    "vstack", "dstack", "column_stack", "where", "copy_", "fill_", "zero_", "zeros", "ones", "zeros_like",
    "ones_like", "empty", "empty_like", "empty_strided", "new_empty", "new_zeros", "new_ones", "full",
    "full_like", "new_full", "arange", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
    "randperm", "normal_", "uniform_", "bernoulli", "bernoulli_", "multinomial", "eye", "eq", "ne", "lt",
    "le", "gt", "ge", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "logical_and",
    "logical_or", "logical_not", "logical_xor", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "any", "all", "argmax", "argmin", "argsort", "sort", "topk", "max", "min", "amax", "amin", "maximum",
    "minimum", "clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_", "clip", "clip_",
    "abs", "abs_", "__abs__", "neg", "neg_", "__neg__", "sign", "floor", "ceil", "round", "trunc",
    "relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "hardtanh", "hardtanh_", "sigmoid", "sigmoid_",
    "tanh", "tanh_", "embedding", "one_hot", "nonzero", "unique", "max_pool1d", "max_pool2d", "max_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "double", "long", "int", "bool", "short", "byte",
    "size", "dim", "numel", "item", "tolist", "stride", "data_ptr", "is_contiguous", "is_floating_point",
    "__repr__", "__format__", "__len__", "__iter__", "__bool__", "__hash__", "__deepcopy__", "__reduce_ex__",
    "register_hook", "_set_grad_enabled",
)
# Backward nodes that only move, select or negate the gradient they receive: finite stays finite, and no
# NaN comes from Inf (nodes that sum or scale it, such as ExpandBackward0 or dropout's, are hooked).
_PASSTHROUGH_NODES = frozenset({
    "AccumulateGrad", "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "TBackward0",
    "TransposeBackward0", "PermuteBackward0", "UnsqueezeBackward0", "SqueezeBackward0", "SqueezeBackward1",
    "SqueezeBackward2", "SliceBackward0", "SelectBackward0", "CloneBackward0", "AliasBackward0",
    "CatBackward0", "StackBackward0", "SplitBackward0", "SplitWithSizesBackward0", "UnbindBackward0",
    "ReluBackward0", "ThresholdBackward0", "NegBackward0", "MaskedFillBackward0", "WhereBackward0",
})
_BACKWARD_CALLS = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)
# Backward nodes whose gradient divides by, or takes a root or log of, a forward value: at its edge the
# gradient is Inf/NaN whatever the loss scale.  Where a node cannot be recomputed on the unscaled gradient
# (checks read later, on devices), an Inf such a node makes in a scaled backward pass is a birth; one made by
# any other node is the scale's overflow.
_SCALE_INDEPENDENT_NODES = frozenset({
    "SqrtBackward0", "RsqrtBackward0", "PowBackward0", "PowBackward1", "PowBackward2", "DivBackward0",
    "DivBackward1", "DivBackward2", "DivBackward3", "ReciprocalBackward0", "LogBackward0", "Log2Backward0",
    "Log10Backward0", "Log1pBackward0", "AcosBackward0", "AsinBackward0", "AtanhBackward0", "AcoshBackward0",
    "NormBackward0", "NormBackward1", "NormBackward2", "NormBackward3", "LinalgVectorNormBackward0",
    "CdistBackward0", "StdBackward0", "VarBackward0", "ProdBackward0", "ProdBackward1", "CumprodBackward0",
    "LgammaBackward0", "DigammaBackward0", "ErfinvBackward0", "LogitBackward0", "XlogyBackward0",
    "BinaryCrossEntropyBackward0", "AngleBackward0", "SgnBackward0",
})
# The attribute a GradScaler's scaled output carries: the scale it was multiplied by.
_SCALE_ATTRIBUTE = "_torchlint_loss_scale"
# How the watch treats a call: check its output, pass it through, or watch the backward pass it runs.
_CHECK, _PASS, _BACKWARD = "check", "pass", "backward"
_HANDLE_TORCH_FUNCTION = getattr(torch.overrides.handle_torch_function, "__code__", None)


def _passthrough_calls() -> frozenset:
    found = set()
    owners = (torch, torch.Tensor, torch.nn.functional, torch.special)
    for name in _PASSTHROUGH_NAMES:
        for owner in owners:
            call = getattr(owner, name, None)
            if call is not None:
                try:
                    hash(call)
                except TypeError:
                    continue
                found.add(call)
    # Attribute reads (``t.grad``, ``t.data``, ``t.T``) reach the mode as the descriptors' ``__get__``.
    for value in vars(torch._C.TensorBase).values():
        if type(value).__name__ == "getset_descriptor":
            found.add(value.__get__)
    return frozenset(found)


class Locator:
    """The program's frames: those of the project's files (each code object is looked up once)."""

    def __init__(self, project_files: Sequence[str]) -> None:
        self.files = frozenset(project_files)
        self.paths: Dict[Any, Optional[str]] = {}  # code object -> its file's real path, None outside the project

    def _path(self, code) -> Optional[str]:
        name = code.co_filename
        path = (name if name in self.files else None) if name.startswith("<") else os.path.realpath(name)
        found = self.paths[code] = path if path in self.files else None
        return found

    def user_frame(self, frame) -> Optional[Any]:
        paths = self.paths
        while frame is not None:
            code = frame.f_code
            path = paths[code] if code in paths else self._path(code)
            if path is not None:
                return frame
            frame = frame.f_back
        return None

    def place(self, frame) -> Optional[Dict[str, Any]]:
        frame = self.user_frame(frame)
        if frame is None:
            return None
        return self.place_of(frame.f_code, frame.f_lineno)

    def place_of(self, code, line: int) -> Dict[str, Any]:
        """The place of a line of a project frame's code (:meth:`user_frame` found it)."""
        return {"path": self.paths[code], "line": line, "function": code.co_name}


class Deferred:
    """Device-side checks waiting to be read: each a few 0-dim tensors and what to do with their values.
    Nothing is launched per check beyond its own reductions: when ``every`` checks wait, their values are
    gathered by one ``stack`` per dtype and one copy per device.  On a GPU that copy does not wait for the
    device: it lands in pinned memory, and a batch is read once its copy is done (in the order the checks were
    added), so the program's queue of kernels never drains for a check.  ``flush()`` waits for every batch."""

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self.pending: List[Tuple[Sequence[Tensor], Callable[[List[float]], None]]] = []
        self.reading: Deque[_Batch] = collections.deque()

    @property
    def waiting(self) -> bool:
        return bool(self.pending or self.reading)

    def add(self, parts: Sequence[Tensor], then: Callable[[List[float]], None]) -> None:
        if not parts:
            return
        self.pending.append((parts, then))
        if len(self.pending) >= self.every:
            self.flush(wait=False)

    def flush(self, wait: bool = True) -> None:
        """Start reading what is pending; hand every batch that has arrived (all of them if ``wait``) to its checks."""
        pending, self.pending = self.pending, []
        if pending:
            self.reading.append(_Batch(pending))
        stop: Optional[TraceStopped] = None
        while self.reading:
            batch = self.reading[0]
            if not (wait or batch.ready() or len(self.reading) > _BATCHES_IN_FLIGHT):
                break
            self.reading.popleft()
            for values, then in zip(batch.values(), batch.checks):
                try:
                    then(values)
                except TraceStopped as exc:  # every record is updated before the run stops
                    stop = stop or exc
        if stop is not None:
            raise stop


# Batches of checks read ahead of the program at most; the oldest is waited for beyond this.
_BATCHES_IN_FLIGHT = 8


class _Batch:
    """One read of many checks: positions of their parts by device and dtype; parts of one dtype are stacked,
    widened together (to a dtype that holds every value of the others exactly) and copied off each device."""

    def __init__(self, pending: Sequence[Tuple[Sequence[Tensor], Callable[[List[float]], None]]]) -> None:
        self.checks = [then for _, then in pending]
        self.sizes = [len(parts) for parts, _ in pending]
        groups: Dict[Any, Dict[Any, List[Tuple[int, int]]]] = {}
        for index, (parts, _) in enumerate(pending):
            for position, part in enumerate(parts):
                groups.setdefault(part.device, {}).setdefault(part.dtype, []).append((index, position))
        self.reads: List[Tuple[List[Tuple[int, int]], _Read]] = []
        for device, by_dtype in groups.items():
            wide = _read_dtype(device)
            stacked = [torch.stack([pending[i][0][j] for i, j in places]).to(wide) for places in by_dtype.values()]
            places = [place for group in by_dtype.values() for place in group]
            self.reads.append((places, _Read(stacked[0] if len(stacked) == 1 else torch.cat(stacked))))

    def ready(self) -> bool:
        return all(read.ready() for _, read in self.reads)

    def values(self) -> List[List[float]]:
        values = [[0.0] * size for size in self.sizes]
        for places, read in self.reads:
            for (i, j), value in zip(places, read.values()):
                values[i][j] = value
        return values


class _Read:
    """The values of a 1-D tensor of checks: copied to pinned memory without waiting on a CUDA device (an event
    tells when they are there), read at once elsewhere."""

    def __init__(self, flat: Tensor) -> None:
        self.event: Any = None
        self.host: Any = None
        if flat.device.type == "cuda":
            try:
                self.host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
                self.host.copy_(flat, non_blocking=True)
                self.event = torch.cuda.Event()
                self.event.record(torch.cuda.current_stream(flat.device))
                return
            except RuntimeError:  # no pinned memory to be had: read the values now
                self.event = None
        self.host = flat.tolist()

    def ready(self) -> bool:
        return self.event is None or self.event.query()

    def values(self) -> List[float]:
        if self.event is not None:
            self.event.synchronize()
            self.host, self.event = self.host.tolist(), None
        return self.host


def _read_dtype(device: Any):
    """The dtype the checks' values are read in on ``device``: it holds every count and every float of a
    narrower dtype exactly (MPS has no float64)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _extremes(tensor: Tensor) -> List[Tensor]:
    """The least and the greatest entry as 0-dim tensors of the tensor's own dtype, in one reduction and no
    copy: both are finite exactly when every entry is (a NaN makes both NaN, an Inf is one of them).  Nothing
    for an empty tensor, whose entries are all finite."""
    if tensor.numel() == 0:
        return []
    least, greatest = torch.aminmax(tensor.detach())
    return [least, greatest]


def _all_finite(values: Sequence[float]) -> bool:
    return all(value - value == 0 for value in values)


def _any_nan(values: Sequence[float]) -> bool:
    return any(value != value for value in values)


def _deferred_for(tensor: Tensor) -> bool:
    return _FORCE_DEFERRED or not tensor.is_cpu


def _finite(value: float) -> bool:
    return value - value == 0


def _nonfinite_kind(tensor: Tensor) -> Tuple[bool, bool]:
    """(has NaN, has Inf) exactly; only called once a sum was not finite."""
    detached = tensor.detach()
    return bool(torch.isnan(detached).any()), bool(torch.isinf(detached).any())


def _kind_word(nan: bool, inf: bool) -> str:
    return "nan and inf" if nan and inf else "nan" if nan else "inf"


def _tensors_in(values: Iterator[Any]) -> Iterator[Any]:
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from (item for item in value if isinstance(item, (Tensor, float)))
        elif isinstance(value, (Tensor, float)):
            yield value


def _input_state(values: Sequence[Any], skip: Any = None) -> Tuple[bool, bool]:
    """(an input holds NaN, an input holds Inf), over tensors and Python floats (``skip``: an in-place op's target)."""
    nan = inf = False
    for value in values:
        if value is skip:
            continue
        if isinstance(value, float):
            nan, inf = nan or math.isnan(value), inf or math.isinf(value)
        elif value.is_floating_point() or value.is_complex():
            has_nan, has_inf = _nonfinite_kind(value)
            nan, inf = nan or has_nan, inf or has_inf
    return nan, inf


def _born(out_nan: bool, out_inf: bool, in_nan: bool, in_inf: bool) -> bool:
    """NaN with no NaN coming in, or Inf with nothing non-finite coming in (a deliberate ``-inf`` mask is not born here)."""
    return (out_nan and not in_nan) or (out_inf and not (in_nan or in_inf))


# -- the site probes ----------------------------------------------------------------------


def _as_tensor(value: Any) -> Optional[Tensor]:
    """A tensor operand as it is, a Python number as a float64 tensor, anything else None."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return None


_NEGATIVE, _NEVER = "negative", "never"  # a power's base below 0; an integer power, which has no edge


def _power_edge(exponent: float) -> str:
    """The edge of ``base ** exponent``: 0 under a negative exponent (inf), 0 or below under one in (0, 1)
    (an infinite gradient, NaN), below 0 under a fractional one above 1 (NaN); an integer power has none."""
    if exponent < 0:
        return edges.ZERO
    if 0 < exponent < 1:
        return edges.NONPOSITIVE
    return _NEVER if exponent == int(exponent) else _NEGATIVE


def _operand_tensor(value: Optional[Tensor]) -> Optional[Tensor]:
    """The detached values to measure, None when there are none (empty, complex)."""
    if value is None:
        return None
    t = value.detach()
    if t.numel() == 0 or t.is_complex():
        return None
    return t.to(torch.uint8) if t.dtype == torch.bool else t


def _measure(edge: str, value: Optional[Tensor], numerator: Any) -> Optional[List[Tensor]]:
    """[entries at the edge, low, high, (0/0 entries)] as 0-dim tensors, computed in full: the device path,
    where nothing may be read before the batch is."""
    t = _operand_tensor(value)
    if t is None:
        return None
    if edge == edges.MASK:
        return [(t != 0).sum()]
    if edge == edges.ZERO:
        parts = [(t == 0).sum(), t.abs().min(), t.max()]
        if isinstance(numerator, (Tensor, int, float)):
            try:
                parts.append(((numerator == 0) & (t == 0)).sum())
            except RuntimeError:  # shapes the division itself broadcasts in another way
                pass
        return parts
    if edge in (edges.ABSORBED, edges.ABSORBED_EXP):
        kept = (t + 1) == 1 if edge == edges.ABSORBED else torch.exp(t) == 1
        return [((t != 0) & kept).sum(), t.abs().min(), t.abs().max()]
    at_edge = {
        edges.NONPOSITIVE: lambda: t <= 0,
        _NEGATIVE: lambda: t < 0,
        _NEVER: lambda: torch.zeros((), dtype=torch.bool, device=t.device),
        edges.OVERFLOW: lambda: torch.isinf(t) | (t <= 0),
        edges.SATURATED: lambda: (t <= 0) | (t >= 1),
        edges.UNIT: lambda: (t <= -1) | (t >= 1),
        edges.PROBABILITIES: lambda: t > 0,
        edges.NONFINITE: lambda: ~torch.isfinite(t),
    }.get(edge)
    if at_edge is None:
        return None
    return [at_edge().sum(), t.min(), t.max()]


def _glance(edge: str, value: Optional[Tensor], numerator: Any) -> Optional[List[float]]:
    """The values of :func:`_measure`, read at once (the CPU path): one reduction for the range first, the
    entries at the edge counted only when the range reaches it."""
    t = _operand_tensor(value)
    if t is None:
        return None
    if edge == edges.MASK:
        return [float(torch.count_nonzero(t))]
    if edge in (edges.ABSORBED, edges.ABSORBED_EXP):
        low, high = (part.item() for part in torch.aminmax(t.abs()))
        if not t.is_floating_point() or not low < torch.finfo(t.dtype).eps:
            return [0.0, low, high]  # |x| >= eps: 1 + x is not 1, nor exp(x)
        return [_measure(edge, t, None)[0].item(), low, high]
    low, high = (part.item() for part in torch.aminmax(t))
    if edge == edges.ZERO:
        if low > 0 or high < 0:
            return [0.0, min(abs(low), abs(high)), high]
        return [part.item() for part in _measure(edge, t, numerator)]
    reached = {
        edges.NONPOSITIVE: low <= 0,
        _NEGATIVE: low < 0,
        _NEVER: False,
        edges.OVERFLOW: high == math.inf or low <= 0,
        edges.SATURATED: low <= 0 or high >= 1,
        edges.UNIT: low <= -1 or high >= 1,
        edges.PROBABILITIES: low >= 0 and high <= 1,
        edges.NONFINITE: not (_finite(low) and _finite(high)),
    }.get(edge)
    if reached is None:
        return None
    return [_measure(edge, t, None)[0].item() if reached else 0.0, low, high]


def _reached(edge: str, count: float, low: Optional[float], high: Optional[float]) -> bool:
    if edge == edges.PROBABILITIES:
        return count > 0 and low is not None and high is not None and low >= 0 and high <= 1
    return count > 0


class SiteChecks:
    """The probes' checks (bound onto :class:`~torchlint.trace.state.Probes` by ``activate``)."""

    def __init__(self, recorder: Recorder, deferred: Deferred) -> None:
        self.recorder = recorder
        self.sites = recorder.sites
        self.deferred = deferred
        self._eps_cache: Dict[Tuple[str, float, Any], Tuple[float, bool]] = {}

    def bind(self, probes: Probes) -> None:
        probes.operand = self.operand  # type: ignore[method-assign]
        probes.numerator = self.numerator  # type: ignore[method-assign]
        probes.exponent = self.exponent  # type: ignore[method-assign]
        probes.eps = self.eps  # type: ignore[method-assign]
        probes.output = self.output  # type: ignore[method-assign]

    def _guarded(self, what: str, work: Callable[[], None]) -> None:
        try:
            with _unwatched():
                work()
        except (TraceStopped, KeyboardInterrupt):
            raise
        except Exception as exc:  # a check must never change what the program does
            self.recorder.error(f"{what}: {type(exc).__name__}: {exc}")

    def operand(self, site: int, value: Any) -> Any:
        record = self.sites.get(site)
        if record is not None:
            self._guarded("site check", lambda: self._operand(record, value))
        return value

    def numerator(self, site: int, value: Any) -> Any:
        record = self.sites.get(site)
        if record is not None:
            record.pending_numerator = value
        return value

    def exponent(self, site: int, value: Any) -> Any:
        record = self.sites.get(site)
        if record is not None:
            self._guarded("power check", lambda: self._power(record, value))
        return value

    def eps(self, site: int, value: Any) -> Any:
        record = self.sites.get(site)
        if record is not None:
            self._guarded("eps check", lambda: self._eps(record, value))
        return value

    def output(self, site: int, value: Any) -> Any:
        record = self.sites.get(site)
        if record is not None and isinstance(value, Tensor) and value.grad_fn is not None:
            self._guarded("gradient hook", lambda: value.grad_fn.register_hook(self._gradient_hook(record, record.calls)))
        return value

    # -- operands ----------------------------------------------------------------------------

    def _operand(self, record: SiteRecord, value: Any) -> None:
        record.calls += 1
        call = record.calls
        if record.edge in PAIRED_EDGES:
            return self._eps_operand(record, value)
        if record.edge == edges.POWER:
            record.pending_operand = value  # judged when the exponent comes
            return
        numerator, record.pending_numerator = record.pending_numerator, None
        self._measured(record, call, value, record.edge, numerator)

    def _power(self, record: SiteRecord, exponent: Any) -> None:
        base, record.pending_operand = record.pending_operand, None
        if base is None:
            return
        if isinstance(exponent, Tensor) and exponent.numel() == 1 and exponent.is_cpu:
            exponent = exponent.item()
        if isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            record.exponent = float(exponent)
            edge = _power_edge(float(exponent))
        else:
            edge = edges.NONPOSITIVE  # an exponent per entry (or one on a device): any base at 0 or below counts
        self._measured(record, record.calls, base, edge)

    def _measured(self, record: SiteRecord, call: int, value: Any, edge: str, numerator: Any = None) -> None:
        tensor = _as_tensor(value)
        if tensor is None:
            return
        dtype, entries, moment = str(tensor.dtype).replace("torch.", ""), tensor.numel(), self.recorder.moment()
        if _deferred_for(tensor):
            parts = _measure(edge, tensor, numerator)
            if parts is not None:
                self.deferred.add(parts, lambda values: self._update(record, call, moment, dtype, entries, values))
        else:
            values = _glance(edge, tensor, numerator)
            if values is not None:
                self._update(record, call, moment, dtype, entries, values)

    def _update(self, record: SiteRecord, call: int, moment: Dict[str, int], dtype: str, entries: int, values: List[float]) -> None:
        count = values[0]
        low = values[1] if len(values) > 1 else None
        high = values[2] if len(values) > 2 else None
        if (low is not None and not _finite(low)) or (high is not None and not _finite(high)):
            record.nonfinite_calls.add(call)  # a value already Inf/NaN: whatever its op does is not this site's edge
        if low is not None and not math.isnan(low):
            record.low = low if record.low is None else min(record.low, low)
        if high is not None and not math.isnan(high):
            record.high = high if record.high is None else max(record.high, high)
        record.dtype = record.dtype or dtype
        if not _reached(record.edge, count, low, high):
            return
        record.calls_at_edge += 1
        record.edge_entries += int(count)
        if len(values) > 3:
            record.zero_over_zero += int(values[3])
        if record.first is None:
            record.first = {"first_call": call, **moment, "edge_entries": int(count), "entries": entries, "dtype": dtype}
            if low is not None:
                record.first["value_at_first"] = low
            record.dtype = dtype
            self.recorder.write()  # evidence survives a crash or os._exit later in the run

    # -- TL105: the eps and the tensor it meets ---------------------------------------------

    def _eps_operand(self, record: SiteRecord, value: Any) -> None:
        if isinstance(value, Tensor) and value.is_floating_point():
            met = (value.dtype, value.numel())
        elif isinstance(value, float):
            met = (torch.float64, 1)
        else:
            return
        if record.pending_eps is not None:
            eps, record.pending_eps = record.pending_eps, None
            self._judge_eps(record, met, eps)
        else:
            record.pending_operand = met

    def _eps(self, record: SiteRecord, value: Any) -> None:
        if isinstance(value, Tensor):
            if value.numel() != 1 or not value.is_cpu:
                return
            value = value.item()
        if not isinstance(value, (int, float)):
            return
        if record.pending_operand is not None:
            met, record.pending_operand = record.pending_operand, None
            self._judge_eps(record, met, float(value))
        else:
            record.pending_eps = float(value)

    def _judge_eps(self, record: SiteRecord, met: Tuple[Any, int], eps: float) -> None:
        dtype, entries = met
        key = (record.edge, eps, dtype)
        if key not in self._eps_cache:
            stored = torch.tensor(eps, dtype=dtype)
            rounded = stored.item()
            if record.edge == edges.UPPER_BOUND:
                lost = eps != 1.0 and rounded == 1.0
            else:
                lost = eps != 0.0 and (rounded == 0.0 or bool(torch.isinf(stored.reciprocal())))
            self._eps_cache[key] = (rounded, lost)
        rounded, lost = self._eps_cache[key]
        record.low = rounded
        record.eps = eps
        name = str(dtype).replace("torch.", "")
        record.dtype = name
        if lost:
            record.calls_at_edge += 1
            record.edge_entries += entries
            if record.first is None:
                record.first = {
                    "first_call": record.calls, **self.recorder.moment(), "edge_entries": entries, "entries": entries,
                    "dtype": name, "eps": eps, "rounded": rounded,
                }
                self.recorder.write()

    # -- gradients ----------------------------------------------------------------------------

    def _gradient_hook(self, record: SiteRecord, call: int) -> Callable[..., None]:
        def hook(grad_inputs, grad_outputs) -> None:
            self._guarded("gradient check", lambda: self._gradient(record, call, grad_inputs, grad_outputs))

        return hook

    def _gradient(self, record: SiteRecord, call: int, produced: Sequence[Any], received: Sequence[Any]) -> None:
        """The op's gradient is Inf/NaN while the gradient it received was finite (and, at this call, its operand)."""
        made = [g for g in produced if isinstance(g, Tensor) and g.is_floating_point()]
        came = [g for g in received if isinstance(g, Tensor) and g.is_floating_point()]
        if not made or call in record.nonfinite_calls:
            return
        moment = {**self.recorder.moment(), "phase": "backward"}
        if _deferred_for(made[0]):
            made_parts = [part for g in made for part in _extremes(g)]
            parts = made_parts + [part for g in came for part in _extremes(g)]
            produced_count = len(made_parts)
            self.deferred.add(parts, lambda values: self._gradient_values(record, call, moment, values[:produced_count], values[produced_count:]))
            return
        if all(_finite(g.detach().sum().item()) for g in made):
            return
        nan = any(_nonfinite_kind(g)[0] for g in made)
        inf = any(_nonfinite_kind(g)[1] for g in made)
        if (nan or inf) and _input_state(came) == (False, False):
            self._gradient_found(record, call, moment, _kind_word(nan, inf))

    def _gradient_values(self, record: SiteRecord, call: int, moment: Dict[str, int], made: List[float], came: List[float]) -> None:
        if call in record.nonfinite_calls or _all_finite(made) or not _all_finite(came):
            return
        self._gradient_found(record, call, moment, "nan" if _any_nan(made) else "inf")

    def _gradient_found(self, record: SiteRecord, call: int, moment: Dict[str, int], kind: str) -> None:
        record.gradient_calls += 1
        if record.gradient_first is None:
            record.gradient_first = {"first_call": call, **moment, "kind": kind}
            self.recorder.write()


# -- the watch over every op ---------------------------------------------------------------------


class Watch(TorchFunctionMode):
    """Every torch call of the program's thread passes here (see the module docs)."""

    def __init__(self, recorder: Recorder, plan: Plan, deferred: Deferred) -> None:
        super().__init__()
        self.recorder = recorder
        self.plan = plan
        self.deferred = deferred
        self.locator = Locator(plan.project_files)
        self.routes: Dict[Any, str] = {call: _PASS for call in _passthrough_calls()}
        self.routes.update({call: _BACKWARD for call in _BACKWARD_CALLS})
        self.node_checked: Dict[type, bool] = {}  # backward node types worth a hook
        self.stepping_unwatched = False  # the watch left the mode stack for an optimizer step
        self.watching = True  # until the first non-finite value (or repeated internal errors)
        self.in_step = False  # an optimizer step runs unwatched: its parameters are checked after it
        self.checking = True  # watching and not in_step, read once per call
        self.optimizer_seen = False
        self.finishing = False  # reading the last device checks at exit: nothing is left to stop
        self.stop_at_next_backward = False
        self.stop_after_backward = False
        self.backward_place: Optional[Dict[str, Any]] = None
        # The loss scale of the backward pass running now (a GradScaler's scaled loss is its root), and the
        # first Inf such a pass made that the scale alone explains, until the scaler's step tells whether it
        # skipped the step (see _scaler_step).
        self.scale: Optional[Tensor] = None
        self.pending_overflow: Optional[Dict[str, Any]] = None
        self.checked_gradients: set = set()  # data pointers of the gradients hooked nodes made in this backward pass
        self.errors = 0
        # Sequence number of each forward output's backward node, and the program's line that made it.
        self.node_numbers: List[int] = []
        self.node_places: List[Tuple[str, int, str]] = []

    def read_before_going_on(self) -> None:
        """With ``stop_on_first``, the checks still on a device are read (waiting for it) at each backward call
        and optimizer step: the run stops in the step that made the first non-finite value, not ``sync_every``
        checks later or never."""
        if self.plan.stop_on_first and self.deferred.waiting and not self.finishing:
            with _unwatched():
                self.deferred.flush()
            if self.stop_after_backward:  # a gradient's, read after its backward call returned
                self.recorder.stopped = STOPPED_FIRST_NONFINITE
                raise TraceStopped(STOPPED_FIRST_NONFINITE)

    def _set_checking(self) -> None:
        self.checking = self.watching and not self.in_step

    def _internal(self, exc: BaseException) -> None:
        self.recorder.error(f"watch: {type(exc).__name__}: {exc}")
        self.errors += 1
        if self.errors >= 20:
            self.watching = False
            self._set_checking()

    # -- forward -----------------------------------------------------------------------------

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        try:
            route = self.routes.get(func, _CHECK)
        except TypeError:  # an unhashable callable: check it
            route = _CHECK
        if route is _BACKWARD:
            return self._backward(func, args, kwargs)
        if route is _PASS or not self.checking:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        try:
            if isinstance(out, Tensor):
                if out.is_floating_point():
                    self._check(func, args, kwargs, out)
            elif isinstance(out, tuple):
                for item in out:
                    if isinstance(item, Tensor) and item.is_floating_point():
                        self._check(func, args, kwargs, item)
        except (TraceStopped, KeyboardInterrupt):
            raise
        except Exception as exc:
            self._internal(exc)
        return out

    def _check(self, func, args, kwargs, out: Tensor) -> None:
        frame: Any = _UNSEEN
        if _FORCE_DEFERRED or not out.is_cpu:
            # Only what the value's reading needs is kept, in its cheapest form: the report's words are made
            # from it if the value is not finite.
            frame = self.locator.user_frame(sys._getframe(2))
            where = None if frame is None else (frame.f_code, frame.f_lineno)
            counts, dtype = self.recorder.counts(), out.dtype
            self.deferred.add(_extremes(out), lambda values: self._forward_values(values, func, where, counts, dtype))
        else:
            total = out.detach().sum().item()
            if total - total != 0:
                self._forward_nonfinite(func, args, kwargs, out)
        grad_fn = out.grad_fn
        if grad_fn is not None:
            if frame is _UNSEEN:
                frame = self.locator.user_frame(sys._getframe(2))
            if frame is not None:
                self.node_numbers.append(grad_fn._sequence_nr())
                self.node_places.append((self.locator.paths[frame.f_code], frame.f_lineno, frame.f_code.co_name))
                if len(self.node_numbers) > _FORWARD_RECORDS:
                    del self.node_numbers[: _FORWARD_RECORDS // 2], self.node_places[: _FORWARD_RECORDS // 2]

    def _forward_nonfinite(self, func, args, kwargs, out: Tensor) -> None:
        nan, inf = _nonfinite_kind(out)
        if not (nan or inf):
            return  # the sum overflowed; every entry is finite
        inputs = list(_tensors_in(list(args) + list(kwargs.values())))
        in_nan, in_inf = _input_state(inputs, skip=out)  # an in-place op's target held the old values
        if not _born(nan, inf, in_nan, in_inf):
            return
        detached = out.detach()
        count = int((~torch.isfinite(detached)).sum())
        self._found(
            {
                "phase": "forward",
                "op": _op_name(func),
                "kind": _kind_word(nan, inf),
                "dtype": str(out.dtype).replace("torch.", ""),
                "entries": count,
                "of": out.numel(),
                **(self.locator.place(sys._getframe(3)) or {}),
                **self.recorder.moment(),
            }
        )

    def _forward_values(self, values: List[float], func, where, counts: Tuple[int, int], dtype) -> None:
        if self.recorder.first_nonfinite is None and not _all_finite(values):
            place = self.locator.place_of(*where) if where is not None else {}
            self._found(
                {
                    "phase": "forward",
                    "op": _op_name(func),
                    "kind": "nan" if _any_nan(values) else "inf",
                    "dtype": str(dtype).replace("torch.", ""),
                    **place,
                    **self.recorder.moment(counts),
                }
            )

    def _found(self, event: Dict[str, Any]) -> None:
        if self.recorder.first_nonfinite is not None:
            return
        self.recorder.first_nonfinite = event
        self.watching = False
        self._set_checking()
        self.recorder.write()
        if self.plan.stop_on_first and not self.finishing:
            if event["phase"] == "backward":
                self.stop_after_backward = True  # raised once the backward call returns, not inside autograd
            else:
                self.recorder.stopped = STOPPED_FIRST_NONFINITE
                raise TraceStopped(STOPPED_FIRST_NONFINITE)

    # -- backward ----------------------------------------------------------------------------

    def _backward(self, func, args, kwargs):
        if self.stop_at_next_backward:
            self.recorder.stopped = STOPPED_MAX_STEPS
            raise TraceStopped(STOPPED_MAX_STEPS)
        self.read_before_going_on()  # a value the forward pass made
        self.in_step = False  # a step that raised never reached its post hook
        self._set_checking()
        handles: List[Any] = []
        if self.watching:
            try:
                self.backward_place = self.locator.place(sys._getframe(1))
                self.checked_gradients.clear()
                roots = _roots(func, args, kwargs)
                self.scale = next((getattr(root, _SCALE_ATTRIBUTE) for root in roots if hasattr(root, _SCALE_ATTRIBUTE)), None)
                handles = self._hook_graph(roots)
            except Exception as exc:
                self._internal(exc)
        try:
            result = func(*args, **kwargs)
        finally:
            self.scale = None
            if _may_keep_graph(func, args, kwargs):
                for handle in handles:
                    handle.remove()  # a later backward through this graph hooks it again
            self.recorder.backward_calls += 1
        self.read_before_going_on()
        if self.stop_after_backward:
            self.recorder.stopped = STOPPED_FIRST_NONFINITE
            raise TraceStopped(STOPPED_FIRST_NONFINITE)
        maximum = self.plan.max_steps
        if maximum is not None and not self.optimizer_seen and self.recorder.backward_calls >= maximum:
            # No optimizer has stepped: backward passes are the steps; stop before the next one (an
            # optimizer step that follows instead takes over the count).
            self.stop_at_next_backward = True
        return result

    def _hook_graph(self, roots: Sequence[Any]) -> List[Any]:
        handles = []
        stack = [root.grad_fn for root in roots if isinstance(root, Tensor) and root.grad_fn is not None]
        seen = set()
        kept = []  # keeps every visited node alive, so that ids are not reused during the walk
        checked = self.node_checked
        hook = self._gradient_hook
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            kept.append(node)
            kind = type(node)
            worth = checked.get(kind)
            if worth is None:
                worth = checked[kind] = kind.__name__ not in _PASSTHROUGH_NODES
            if worth:
                handles.append(node.register_hook(hook))
            for child, _ in node.next_functions:
                if child is not None:
                    stack.append(child)
        return handles

    def _gradient_hook(self, grad_inputs, grad_outputs) -> None:
        if not self.watching:
            return
        try:
            for gradient in grad_inputs:
                if gradient is None or not gradient.is_floating_point():
                    continue
                if _FORCE_DEFERRED or not gradient.is_cpu:
                    return self._gradient_deferred(grad_inputs, grad_outputs)
                total = (gradient.detach() if gradient.requires_grad else gradient).sum().item()
                if total - total != 0:
                    return self._gradient_nonfinite(grad_inputs, grad_outputs)
        except TraceStopped:
            raise
        except Exception as exc:
            self._internal(exc)

    def _gradient_nonfinite(self, grad_inputs, grad_outputs) -> None:
        made = [g for g in grad_inputs if isinstance(g, Tensor) and g.is_floating_point()]
        nan = any(_nonfinite_kind(g)[0] for g in made)
        inf = any(_nonfinite_kind(g)[1] for g in made)
        in_nan, in_inf = _input_state([g for g in grad_outputs if isinstance(g, Tensor)])
        if not _born(nan, inf, in_nan, in_inf):
            return
        if self.scale is not None and self.pending_overflow is not None and (in_nan or in_inf):
            return  # what the scale's overflow became further down the same pass
        node = torch._C._current_autograd_node()
        name, number = (node.name(), node._sequence_nr()) if node is not None else ("backward", None)
        count = sum(int((~torch.isfinite(g.detach())).sum()) for g in made)
        event = {
            "phase": "backward",
            "op": name,
            "kind": _kind_word(nan, inf),
            "dtype": str(made[0].dtype).replace("torch.", ""),
            "entries": count,
            **self._node_place(number),
            **self.recorder.moment(),
        }
        if self.scale is not None and _scale_made(node, name, grad_outputs, self.scale):
            return self._overflow(event)
        self._found(event)

    def _gradient_deferred(self, grad_inputs, grad_outputs) -> None:
        # A gradient this node received is read unless it is the very memory a hooked node of this pass made:
        # that one is read already, and the values are read in the order the nodes ran, so the first node
        # that makes an Inf/NaN still sees finite gradients come in (the root's gradient and what a tensor
        # hook returns are read here).
        checked = self.checked_gradients
        made_parts: List[Tensor] = []
        for gradient in grad_inputs:
            if isinstance(gradient, Tensor) and gradient.is_floating_point():
                made_parts.extend(_extremes(gradient))
                checked.add(gradient.data_ptr())
        parts = list(made_parts)
        for gradient in grad_outputs:
            if isinstance(gradient, Tensor) and gradient.is_floating_point() and gradient.data_ptr() not in checked:
                parts.extend(_extremes(gradient))
        node = torch._C._current_autograd_node()
        name, number = (node.name(), node._sequence_nr()) if node is not None else ("backward", None)
        counts = self.recorder.counts()
        scaled = self.scale is not None
        produced = len(made_parts)
        self.deferred.add(parts, lambda values: self._gradient_values(values, produced, name, number, counts, scaled))

    def _gradient_values(
        self, values: List[float], produced: int, name: str, number: Optional[int], counts: Tuple[int, int], scaled: bool = False
    ) -> None:
        made, came = values[:produced], values[produced:]
        if self.recorder.first_nonfinite is not None or _all_finite(made) or not _all_finite(came):
            return
        kind = "nan" if _any_nan(made) else "inf"
        event = {"phase": "backward", "op": name, "kind": kind, **self._node_place(number), **self.recorder.moment(counts)}
        if scaled and name not in _SCALE_INDEPENDENT_NODES:
            return self._overflow(event)
        self._found(event)

    # -- values made out of sight ----------------------------------------------------------------

    def arrived(self, what: str, values: Any, inputs: Any = ()) -> None:
        """Values that code the watch does not see made (a DataLoader worker's batch, a compiled call's
        output): the first Inf/NaN among them with no Inf/NaN among ``inputs`` is born in that code."""
        if not self.watching or self.recorder.first_nonfinite is not None:
            return
        try:
            with _unwatched():
                made = [t for t in _tensors_deep(values) if t.is_floating_point()]
                if not made or not all(t.is_cpu for t in made):
                    return
                for tensor in made:
                    if not _finite(tensor.detach().sum().item()):
                        nan, inf = _nonfinite_kind(tensor)
                        if not (nan or inf):
                            continue
                        in_nan, in_inf = _input_state([t for t in _tensors_deep(inputs) if t.is_floating_point()])
                        if not _born(nan, inf, in_nan, in_inf):
                            return
                        event = {"phase": "unwatched code", "op": what, "kind": _kind_word(nan, inf), "dtype": str(tensor.dtype).replace("torch.", "")}
                        self._found({**event, **(self.locator.place(sys._getframe(2)) or {}), **self.recorder.moment()})
                        return
        except TraceStopped:
            raise
        except Exception as exc:
            self._internal(exc)

    # -- mixed precision -------------------------------------------------------------------------

    def _overflow(self, event: Dict[str, Any]) -> None:
        """An Inf of a scaled backward pass that the loss scale explains: held until the scaler's step."""
        if self.pending_overflow is None:
            self.pending_overflow = event

    def scaler_step(self, scaler, optimizer, step: Callable[[], Any]) -> Any:
        """``GradScaler.step``: run it, then count a step it skipped as a step, and settle the held overflow: a
        skipped step was the scaler's answer to it (counted, not reported); a step taken means the Inf never
        reached the parameters' gradients, so it was a value born non-finite after all."""
        before = self.recorder.optimizer_steps
        result = step()
        try:
            with _unwatched():
                if self.deferred.waiting:
                    self.deferred.flush()  # the step has waited for the device already
                skipped = scaler.is_enabled() and _scaler_found_inf(scaler, optimizer)
        except TraceStopped:
            raise
        except Exception as exc:
            self._internal(exc)
            return result
        held, self.pending_overflow = self.pending_overflow, None
        if skipped:
            self.recorder.scaler_skipped_steps += 1
            if self.recorder.optimizer_steps == before:  # the optimizer never ran (its fused form counts itself)
                self.recorder.optimizer_steps += 1
            if held is not None:
                self.recorder.scaler_overflows += 1
                if self.recorder.first_overflow is None:
                    self.recorder.first_overflow = held
            maximum = self.plan.max_steps
            if maximum is not None and self.recorder.optimizer_steps >= maximum:
                self.recorder.stopped = STOPPED_MAX_STEPS
                raise TraceStopped(STOPPED_MAX_STEPS)
        elif held is not None:
            self._found(held)
            if self.stop_after_backward:
                self.recorder.stopped = STOPPED_FIRST_NONFINITE
                raise TraceStopped(STOPPED_FIRST_NONFINITE)
        return result

    def _node_place(self, number: Optional[int]) -> Dict[str, Any]:
        """The program's line whose forward call made the backward node numbered ``number``."""
        if number is not None:
            position = bisect.bisect_left(self.node_numbers, number)
            if position < len(self.node_numbers):
                path, line, function = self.node_places[position]
                return {"path": path, "line": line, "function": function}
        return {**(self.backward_place or {}), "in_backward_call": True}

    # -- optimizer steps ------------------------------------------------------------------------

    def before_step(self, optimizer, args, kwargs) -> None:
        self.optimizer_seen = True
        self.stop_at_next_backward = False
        if self.watching and _distributed():
            try:
                with _unwatched():
                    self._check_received_gradients(optimizer)
            except TraceStopped:
                raise
            except Exception as exc:
                self._internal(exc)
        if len(args) > 1 or kwargs.get("closure") is not None:
            return  # args holds the optimizer; a closure (LBFGS) runs the program's passes: keep watching
        self.in_step = True
        self._set_checking()
        # The step's many small calls need no check (the parameters are checked after it): the watch leaves
        # the mode stack for it when it is on top, so that they do not even pass through it.
        depth = torch._C._len_torch_function_stack()
        if depth and torch._C._get_function_stack_at(depth - 1) is self:
            self.__exit__(None, None, None)
            self.stepping_unwatched = True

    def after_step(self, optimizer, args, kwargs) -> None:
        self.in_step = False
        self._set_checking()
        self.recorder.optimizer_steps += 1
        try:
            if self.watching:
                with _unwatched():
                    self._check_parameters(optimizer)
            self.read_before_going_on()
        except TraceStopped:
            raise
        except Exception as exc:
            self._internal(exc)
        finally:
            if self.stepping_unwatched:
                self.stepping_unwatched = False
                self.__enter__()
        maximum = self.plan.max_steps
        if maximum is not None and self.recorder.optimizer_steps >= maximum:
            self.recorder.stopped = STOPPED_MAX_STEPS
            raise TraceStopped(STOPPED_MAX_STEPS)

    def _check_received_gradients(self, optimizer) -> None:
        """Before a step of a run with several ranks: a gradient that is Inf/NaN though no value of this rank's
        passes was born so came from another rank, through the gradient all-reduce (DistributedDataParallel's
        runs inside the backward pass, out of the watch's sight)."""
        gradients = [
            p.grad
            for group in optimizer.param_groups
            for p in group["params"]
            if isinstance(p, Tensor) and isinstance(p.grad, Tensor) and p.grad.is_floating_point()
        ]
        if not gradients:
            return
        moment = self.recorder.moment()
        place = self.backward_place or {}
        if _FORCE_DEFERRED or not all(g.is_cpu for g in gradients):
            gradients = [g for g in gradients if g.numel()]
            parts = [part for g in gradients for part in _extremes(g)]
            self.deferred.add(parts, lambda values: self._received_values(values, gradients, place, moment))
            return
        for gradient in gradients:
            if not _finite(gradient.detach().sum().item()):
                nan, inf = _nonfinite_kind(gradient)
                return self._received("gradient all-reduce", _kind_word(nan, inf), gradient, place, moment)

    def _received_values(self, values: List[float], gradients: List[Tensor], place, moment) -> None:
        for index, gradient in enumerate(gradients):
            pair = values[2 * index : 2 * index + 2]
            if not _all_finite(pair):
                return self._received("gradient all-reduce", "nan" if _any_nan(pair) else "inf", gradient, place, moment)

    def _received(self, op: str, kind: str, tensor: Tensor, place, moment) -> None:
        event = {"phase": "collective", "op": op, "kind": kind, "dtype": str(tensor.dtype).replace("torch.", ""), "from_other_rank": True}
        self._found({**event, **(place or {}), **moment})

    def collective(self, name: str, call: Callable[[], Any], own: Sequence[Tensor], received: Sequence[Tensor]) -> Any:
        """A blocking ``torch.distributed`` collective: ``own`` finite before it and ``received`` Inf/NaN after it
        means the value came from another rank."""
        if not self.watching or self.recorder.first_nonfinite is not None or not all(t.is_cpu for t in (*own, *received)):
            return call()
        with _unwatched():
            finite_before = all(_finite(t.detach().sum().item()) for t in own if t.is_floating_point())
        result = call()
        if finite_before:
            with _unwatched():
                for tensor in received:
                    if tensor.is_floating_point() and not _finite(tensor.detach().sum().item()):
                        nan, inf = _nonfinite_kind(tensor)
                        self._received(f"torch.distributed.{name}", _kind_word(nan, inf), tensor, self.locator.place(sys._getframe(2)), self.recorder.moment())
                        break
        return result

    def _check_parameters(self, optimizer) -> None:
        """After a step: a parameter it made Inf/NaN (one sum per parameter; on devices, read later)."""
        parameters = [
            p for group in optimizer.param_groups for p in group["params"] if isinstance(p, Tensor) and p.is_floating_point()
        ]
        if not parameters:
            return
        place = self.locator.place(sys._getframe(2))
        moment = self.recorder.moment()
        moment["step"] -= 1  # the step that just ended
        name = f"{type(optimizer).__name__}.step"
        if _FORCE_DEFERRED or not all(p.is_cpu for p in parameters):
            parameters = [p for p in parameters if p.numel()]
            parts = [part for p in parameters for part in _extremes(p)]
            self.deferred.add(parts, lambda values: self._parameter_values(values, parameters, name, place, moment))
            return
        for parameter in parameters:
            total = parameter.detach().sum().item()
            if _finite(total):
                continue
            nan, inf = _nonfinite_kind(parameter)
            if nan or inf:
                grad = parameter.grad
                in_nan, in_inf = _input_state([grad] if isinstance(grad, Tensor) else [])
                kind = _kind_word(nan, inf)
                return self._step_found(name, kind, parameter, not (in_nan or in_inf), place, moment)

    def _parameter_values(self, values: List[float], parameters: List[Tensor], name: str, place, moment) -> None:
        for index, parameter in enumerate(parameters):
            pair = values[2 * index : 2 * index + 2]
            if not _all_finite(pair):
                return self._step_found(name, "nan" if _any_nan(pair) else "inf", parameter, None, place, moment)

    def _step_found(self, name: str, kind: str, parameter: Tensor, born: Optional[bool], place, moment) -> None:
        event = {"phase": "optimizer step", "op": name, "kind": kind, "dtype": str(parameter.dtype).replace("torch.", ""), **(place or {}), **moment}
        if born is not None:
            event["born"] = born  # False: the step met a gradient that was already Inf/NaN
        self._found(event)


def _distributed() -> bool:
    """Whether this process is one rank of several (``torch.distributed`` initialised)."""
    try:
        distributed = torch.distributed
        return distributed.is_available() and distributed.is_initialized() and distributed.get_world_size() > 1
    except Exception:
        return False


# torch.distributed's blocking collectives: name -> (the tensors this rank gives, the tensors it receives),
# read from the call's arguments.
def _first(args, kwargs, *names):
    if args:
        return args[0]
    for name in names:
        if name in kwargs:
            return kwargs[name]
    return None


def _second(args, kwargs, *names):
    if len(args) > 1:
        return args[1]
    for name in names:
        if name in kwargs:
            return kwargs[name]
    return None


def _tensors(value) -> List[Tensor]:
    return list(_tensors_deep(value))


_COLLECTIVES: Dict[str, Callable[[Any, Any], Tuple[List[Tensor], List[Tensor]]]] = {
    "all_reduce": lambda a, k: (_tensors(_first(a, k, "tensor")),) * 2,
    "broadcast": lambda a, k: ([], _tensors(_first(a, k, "tensor"))),
    "reduce": lambda a, k: (_tensors(_first(a, k, "tensor")),) * 2,
    "all_gather": lambda a, k: (_tensors(_second(a, k, "tensor")), _tensors(_first(a, k, "tensor_list"))),
    "all_gather_into_tensor": lambda a, k: (_tensors(_second(a, k, "input_tensor")), _tensors(_first(a, k, "output_tensor"))),
    "reduce_scatter_tensor": lambda a, k: (_tensors(_second(a, k, "input")), _tensors(_first(a, k, "output"))),
    "all_to_all_single": lambda a, k: (_tensors(_second(a, k, "input")), _tensors(_first(a, k, "output"))),
}


def _watch_collectives(watch: Watch) -> Dict[str, Any]:
    """Wrap the blocking collectives of ``torch.distributed`` (an ``async_op=True`` call passes through); the originals."""
    try:
        distributed = torch.distributed
        if not distributed.is_available():
            return {}
    except Exception:
        return {}
    originals: Dict[str, Any] = {}
    for name, tensors_of in _COLLECTIVES.items():
        original = getattr(distributed, name, None)
        if original is None:
            continue
        originals[name] = original

        def wrapped(*args, _name=name, _original=original, _tensors_of=tensors_of, **kwargs):
            if kwargs.get("async_op") or not _distributed():
                return _original(*args, **kwargs)
            try:
                own, received = _tensors_of(args, kwargs)
            except Exception:
                return _original(*args, **kwargs)
            return watch.collective(_name, lambda: _original(*args, **kwargs), own, received)

        wrapped.__wrapped__ = original  # type: ignore[attr-defined]
        wrapped.__name__ = name
        setattr(distributed, name, wrapped)
    return originals


def _unwatch_collectives(originals: Dict[str, Any]) -> None:
    for name, original in originals.items():
        setattr(torch.distributed, name, original)


def _scale_made(node, name: str, incoming: Sequence[Any], scale: Tensor) -> bool:
    """Whether a node's Inf/NaN gradient is the loss scale's overflow: the node's backward, run again on the
    gradient it received divided by the scale, gives finite values.  A node that cannot be run again is
    judged by its kind (_SCALE_INDEPENDENT_NODES)."""
    if node is not None:
        try:
            with _unwatched():
                again = node(*[g / scale.to(g.device) if isinstance(g, Tensor) else g for g in incoming])
                again = again if isinstance(again, (tuple, list)) else (again,)
                return all(bool(torch.isfinite(g).all()) for g in again if isinstance(g, Tensor) and g.is_floating_point())
        except Exception:
            pass
    return name not in _SCALE_INDEPENDENT_NODES


def _scaler_found_inf(scaler, optimizer) -> bool:
    """Whether the scaler's last step for ``optimizer`` found Inf/NaN gradients (and so was skipped)."""
    state = scaler._per_optimizer_states.get(id(optimizer), {})
    found = state.get("found_inf_per_device") or {}
    return any(float(value.item()) != 0.0 for value in found.values())


def _mark_scaled(value: Any, scale: Tensor) -> Any:
    """``GradScaler.scale``'s output with the scale noted on each tensor (a backward from it is scaled)."""
    if isinstance(value, Tensor):
        try:
            setattr(value, _SCALE_ATTRIBUTE, scale)
        except (AttributeError, RuntimeError):
            pass
    elif isinstance(value, (list, tuple)):
        for item in value:
            _mark_scaled(item, scale)
    return value


def _roots(func, args, kwargs) -> List[Any]:
    """The tensors a backward call starts from."""
    if func is torch.Tensor.backward:
        return [args[0]] if args else []
    first = args[0] if args else kwargs.get("tensors" if func is torch.autograd.backward else "outputs")
    if isinstance(first, Tensor):
        return [first]
    return list(first) if isinstance(first, (list, tuple)) else []


def _may_keep_graph(func, args, kwargs) -> bool:
    """Whether the graph may outlive this backward call (``retain_graph``/``create_graph``, or arguments
    past the first two that may say so); a freed graph takes its hooks with it."""
    if kwargs.get("retain_graph") or kwargs.get("create_graph"):
        return True
    return len(args) > (3 if func is torch.autograd.grad else 2)


def _op_name(func) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    qualified = getattr(func, "__qualname__", "") or ""
    if qualified.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", None)
    if module == "torch._C._nn":
        module = "torch.nn.functional"
    elif module is None or module.startswith("torch._C"):
        module = "torch"
    return f"{module}.{name}"


# -- the program's warnings ------------------------------------------------------------------------


def _visible_frames(frame) -> Iterator[Any]:
    """The frames a run without the watch would have: the watch's handler, the ``handle_torch_function``
    that called it and the torch function's first entry above that are left out."""
    handlers = (Watch.__torch_function__.__code__, Watch._backward.__code__)
    while frame is not None:
        if frame.f_code in handlers:
            frame = frame.f_back
            if frame is not None and frame.f_code is _HANDLE_TORCH_FUNCTION:
                frame = frame.f_back
                frame = frame.f_back if frame is not None else None
            continue
        yield frame
        frame = frame.f_back


def _warn_past_the_watch(original: Callable[..., None]) -> Callable[..., None]:
    """``warnings.warn`` that names the line a run without the watch would name: torch functions warn
    with a ``stacklevel`` that counts frames, and the watch adds some between the program and them."""

    def warn(message, category=None, stacklevel=1, source=None, **more):
        caller = sys._getframe(1)
        raw = caller
        distance = 1
        skipped = False
        for level, frame in enumerate(_visible_frames(caller), 1):
            while raw is not None and raw is not frame:
                raw = raw.f_back
                distance += 1
                skipped = True
            if level == stacklevel:
                break
            raw = raw.f_back if raw is not None else None
            distance += 1
        else:
            raw = None  # a shallower stack than stacklevel: warn's own fallback applies
        if not skipped or raw is None:
            return original(message, category, stacklevel + 1, source, **more)
        return original(message, category, distance + 1, source, **more)

    warn.__wrapped__ = original  # type: ignore[attr-defined]
    return warn


# -- the program's fast paths ------------------------------------------------------------------------

_BASIC_TYPES = (bool, int, float, complex, str, bytes, type(None))


def _has_torch_function_past_the_watch(original: Callable[[Any], bool], watch: Watch) -> Callable[[Any], bool]:
    """``torch.overrides.has_torch_function`` answering as in a run without the watch.

    Modules with a fused inference path (``nn.TransformerEncoderLayer``, ``nn.MultiheadAttention``) leave
    it when any torch function mode is active, and the general path rounds differently.  While the watch
    is the only mode, the answer is the one torch gives for the arguments alone: a tensor subclass with a
    ``__torch_function__`` of its own (the C check, for the types torch passes over)."""
    disabled = torch._C._disabled_torch_function_impl

    def has_torch_function(relevant_args) -> bool:
        depth = torch._C._len_torch_function_stack()
        if depth != 1 or torch._C._get_function_stack_at(0) is not watch:
            return original(relevant_args)
        if not torch._C._is_torch_function_enabled():
            return False
        for value in relevant_args:
            kind = type(value)
            if kind is Tensor or kind is torch.nn.Parameter or kind in _BASIC_TYPES:
                continue
            handler = getattr(value, "__torch_function__", None)
            if handler is not None and handler is not disabled:
                return True
        return False

    has_torch_function.__wrapped__ = original  # type: ignore[attr-defined]
    return has_torch_function


# -- starting --------------------------------------------------------------------------------------


class Runtime:
    """The checks of one traced process, once torch is imported."""

    def __init__(self, plan: Plan, recorder: Recorder, probes: Probes) -> None:
        self.deferred = Deferred(plan.sync_every)
        self.sites = SiteChecks(recorder, self.deferred)
        self.sites.bind(probes)
        self.watch = Watch(recorder, plan, self.deferred)
        self.watch.__enter__()
        self._hooks = [
            register_optimizer_step_pre_hook(self.watch.before_step),
            register_optimizer_step_post_hook(self.watch.after_step),
        ]
        self._warn, self._has_torch_function = warnings.warn, torch.overrides.has_torch_function
        warnings.warn = _warn_past_the_watch(self._warn)
        torch.overrides.has_torch_function = _has_torch_function_past_the_watch(self._has_torch_function, self.watch)
        self._scaler = _watch_grad_scaler(self.watch)
        self._collectives = _watch_collectives(self.watch)
        self._compile = _unwatch_compiled_code(self.watch)
        self._loader = _name_worker_processes(self.watch)

    def finish(self) -> None:
        """Read what is still on the devices (at exit)."""
        self.watch.finishing = True
        self.watch.watching = False
        self.watch._set_checking()
        try:
            with _unwatched():
                self.deferred.flush()
        except Exception as exc:
            self.watch.recorder.error(f"reading device checks at exit: {type(exc).__name__}: {exc}")
        held, self.watch.pending_overflow = self.watch.pending_overflow, None
        if held is not None:  # no scaler step followed the scaled backward pass: nothing skipped it
            self.watch._found(held)

    def close(self) -> None:
        """Undo ``__init__`` (for a process that goes on without the checks, such as a test)."""
        self.finish()
        depth = torch._C._len_torch_function_stack()
        if depth and torch._C._get_function_stack_at(depth - 1) is self.watch:
            self.watch.__exit__(None, None, None)
        for handle in self._hooks:
            handle.remove()
        warnings.warn, torch.overrides.has_torch_function = self._warn, self._has_torch_function
        _unwatch_grad_scaler(self._scaler)
        _unwatch_collectives(self._collectives)
        if self._compile is not None:
            torch.compile = self._compile
        if self._loader is not None:
            torch.utils.data.DataLoader.__iter__ = self._loader


# -- where the watch does not go ---------------------------------------------------------------------


class _Unwatched:
    """Takes the watch off the mode stack for a call (and puts it back after), when it is on top."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.left = False

    def __enter__(self) -> None:
        depth = torch._C._len_torch_function_stack()
        if depth and torch._C._get_function_stack_at(depth - 1) is self.watch:
            self.watch.__exit__(None, None, None)
            self.left = True

    def __exit__(self, *exc) -> None:
        if self.left:
            self.left = False
            self.watch.__enter__()


def _unwatch_compiled_code(watch: Watch) -> Optional[Callable[..., Any]]:
    """``torch.compile`` whose compiled callables run without the watch (TorchDynamo cannot trace through
    it), each named in the report as unwatched; the original."""
    original = getattr(torch, "compile", None)
    if original is None:
        return None

    def unwatched(compiled: Any, name: str) -> Any:
        watch.recorder.not_watched(f"{name}, compiled by torch.compile: its ops ran unchecked")
        what = f"{name} (compiled by torch.compile)"
        if isinstance(compiled, torch.nn.Module):
            leaving = _Unwatched(watch)

            def after(module, args, output):
                leaving.__exit__()
                watch.arrived(what, output, args)

            compiled.register_forward_pre_hook(lambda module, args: leaving.__enter__())
            compiled.register_forward_hook(after)
            return compiled

        def call(*args, **kwargs):
            with _Unwatched(watch):
                output = compiled(*args, **kwargs)
            watch.arrived(what, output, (args, kwargs))
            return output

        call.__wrapped__ = compiled  # type: ignore[attr-defined]
        return call

    def compile(model: Any = None, *args, **kwargs):
        if model is None:  # @torch.compile(mode=...): a decorator
            decorate = original(None, *args, **kwargs)
            return lambda function: unwatched(decorate(function), _callable_name(function))
        return unwatched(original(model, *args, **kwargs), _callable_name(model))

    compile.__wrapped__ = original  # type: ignore[attr-defined]
    torch.compile = compile
    return original


def _callable_name(value: Any) -> str:
    if isinstance(value, torch.nn.Module):
        return f"the forward of {type(value).__name__}"
    return getattr(value, "__qualname__", None) or repr(value)


def _name_worker_processes(watch: Watch) -> Optional[Callable[..., Any]]:
    """``DataLoader.__iter__`` noting loaders whose datasets and collate functions run in worker processes,
    which the watch does not follow (forked workers start with it switched off), and checking each batch
    they send; the original."""
    recorder = watch.recorder
    loader_class = getattr(getattr(getattr(torch, "utils", None), "data", None), "DataLoader", None)
    if loader_class is None:
        return None
    original = loader_class.__iter__

    def iterate(loader):
        workers = getattr(loader, "num_workers", 0)
        if workers:
            dataset = type(getattr(loader, "dataset", None)).__name__
            recorder.not_watched(
                f"DataLoader worker processes (num_workers={workers}): {dataset}'s items and the collate function "
                "were made there (each batch is checked as it arrives); num_workers=0 watches them"
            )
            return _CheckedBatches(original(loader), watch, f"a batch of {dataset} made by a DataLoader worker")
        return original(loader)

    iterate.__wrapped__ = original  # type: ignore[attr-defined]
    loader_class.__iter__ = iterate
    return original


class _CheckedBatches:
    """A DataLoader iterator whose batches (made in worker processes) are checked as they arrive."""

    def __init__(self, iterator: Any, watch: Watch, what: str) -> None:
        self.iterator = iterator
        self.watch = watch
        self.what = what

    def __iter__(self) -> "_CheckedBatches":
        return self

    def __next__(self) -> Any:
        batch = next(self.iterator)
        self.watch.arrived(self.what, batch)
        return batch

    def __len__(self) -> int:
        return len(self.iterator)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.iterator, name)


def _tensors_deep(value: Any, depth: int = 0) -> Iterator[Tensor]:
    """The tensors in a batch or an output: nested tuples, lists and dicts."""
    if isinstance(value, Tensor):
        yield value
    elif depth < 4 and isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors_deep(item, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors_deep(item, depth + 1)


def _watch_grad_scaler(watch: Watch) -> Dict[str, Any]:
    """Wrap ``torch.amp.GradScaler``'s ``scale`` and ``step`` (the CUDA scaler inherits both); the originals."""
    scaler_class = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_class is None:
        return {}
    originals = {"class": scaler_class, "scale": scaler_class.scale, "step": scaler_class.step}

    def scale(scaler, outputs):
        result = originals["scale"](scaler, outputs)
        if scaler.is_enabled() and getattr(scaler, "_scale", None) is not None:
            _mark_scaled(result, scaler._scale)
        return result

    def step(scaler, optimizer, *args, **kwargs):
        return watch.scaler_step(scaler, optimizer, lambda: originals["step"](scaler, optimizer, *args, **kwargs))

    scale.__wrapped__, step.__wrapped__ = originals["scale"], originals["step"]  # type: ignore[attr-defined]
    scaler_class.scale, scaler_class.step = scale, step
    return originals


def _unwatch_grad_scaler(originals: Dict[str, Any]) -> None:
    if originals:
        originals["class"].scale, originals["class"].step = originals["scale"], originals["step"]


def activate(plan: Plan, recorder: Recorder, probes: Probes) -> Runtime:
    recorder.torch_imported = True
    started = Runtime(plan, recorder, probes)
    os.register_at_fork(after_in_child=lambda: _stop_in_child(started.watch))
    return started


def _stop_in_child(watch: Watch) -> None:
    """A forked process (a DataLoader worker) is not watched: its values never reach the report."""
    watch.watching = False
    watch.plan.stop_on_first = False
    watch._set_checking()
