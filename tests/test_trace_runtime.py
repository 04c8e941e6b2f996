"""The traced process's checks in this process (``trace/runtime.py``): what the watch sees and what it
leaves as it was.  Each test starts the checks and undoes them (``Runtime.close``)."""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from torchlint.trace import runtime  # noqa: E402  (imports torch)
from torchlint.trace.plan import Plan, SitePlan  # noqa: E402
from torchlint.trace.state import Probes, Recorder  # noqa: E402

HERE = __file__


@pytest.fixture
def checks(tmp_path):
    site = SitePlan(0, "TL101", "nonpositive", operand=(1, 1, 1, 2))
    recorder = Recorder(Plan(results_path=str(tmp_path / "results.json"), project_files=[HERE], sites={HERE: [site]}))
    probes = Probes()
    started = runtime.activate(recorder.plan, recorder, probes)
    try:
        yield started, recorder, probes
    finally:
        started.close()


def test_an_optimizer_step_runs_outside_the_watch_and_its_parameters_are_checked_after_it(checks, monkeypatch):
    started, recorder, _ = checks
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.Adam([weight], lr=0.1)
    weight.sum().backward()
    reached = []
    original = runtime.Watch.__torch_function__

    def spy(self, func, types, args=(), kwargs=None):
        reached.append(getattr(func, "__name__", ""))
        return original(self, func, types, args, kwargs)

    monkeypatch.setattr(runtime.Watch, "__torch_function__", spy)
    optimizer.step()
    monkeypatch.undo()
    assert "add_" not in reached and "addcdiv_" not in reached  # the step's own calls never reached the watch
    assert recorder.optimizer_steps == 1 and recorder.first_nonfinite is None
    assert torch._C._get_function_stack_at(torch._C._len_torch_function_stack() - 1) is started.watch

    with torch.no_grad():
        weight.grad.fill_(float("inf"))
    optimizer.step()  # Adam turns an infinite gradient into a NaN parameter
    event = recorder.first_nonfinite
    assert (event["phase"], event["op"], event["born"], event["step"]) == ("optimizer step", "Adam.step", False, 1)


def test_a_closure_step_stays_watched(checks):
    started, recorder, _ = checks
    weight = torch.nn.Parameter(torch.tensor([4.0]))
    optimizer = torch.optim.LBFGS([weight], max_iter=2)

    def closure():
        optimizer.zero_grad()
        loss = torch.sqrt(weight - 4.0).sum()  # sqrt(0): an infinite gradient, inside the step's closure
        loss.backward()
        return loss

    optimizer.step(closure)
    event = recorder.first_nonfinite
    assert (event["phase"], event["op"], event["line"]) == ("backward", "SqrtBackward0", closure.__code__.co_firstlineno + 2)
    assert recorder.backward_calls >= 1


def test_a_value_born_nonfinite_is_named_at_its_line_and_a_propagated_one_is_not(checks):
    _, recorder, _ = checks
    mask = torch.zeros(4)
    scores = torch.randn(4).masked_fill(mask == 0, float("-inf"))  # a deliberate -inf: no birth
    assert recorder.first_nonfinite is None
    weights = torch.softmax(scores, dim=0)  # a fully masked row: NaN from no NaN
    line = sys._getframe().f_lineno - 1
    assert torch.isnan(weights).all()
    event = recorder.first_nonfinite
    assert (event["path"], event["line"], event["op"], event["kind"], event["phase"]) == (HERE, line, "torch.softmax", "nan", "forward")


def test_site_probes_return_their_values_and_record_the_edge(checks):
    _, recorder, probes = checks
    values = torch.tensor([0.0, 2.0, -1.0])
    assert probes.operand(0, values) is values
    evidence = recorder.sites[0].evidence()
    assert (evidence["calls_at_edge"], evidence["edge_entries"], evidence["min"], evidence["dtype"]) == (1, 2, -1.0, "float32")


def test_fused_inference_paths_compute_what_they_compute_without_the_watch(tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        plain = layer(x)
    recorder = Recorder(Plan(results_path=str(tmp_path / "results.json"), project_files=[HERE]))
    started = runtime.activate(recorder.plan, recorder, Probes())
    try:
        with torch.no_grad():
            watched = layer(x)
    finally:
        started.close()
    assert torch.equal(plain, watched)


def test_deferred_checks_are_read_together_in_the_order_they_were_added():
    """Each check keeps its 0-dim parts as they are (a count, a minimum in the tensor's dtype, a float64 sum);
    the values come back, as floats and in order, when ``every`` checks are waiting: one read for all of them."""
    read = []
    deferred = runtime.Deferred(every=3)
    t = torch.tensor([0.0, 2.0, float("inf")], dtype=torch.float16)
    deferred.add([(t == 0).sum(), t.min(), t.max()], read.append)
    deferred.add([t.detach().sum(dtype=torch.float64)], read.append)
    assert read == [] and len(deferred.pending) == 2
    deferred.add([torch.tensor(1.5, dtype=torch.float64), torch.tensor(7)], read.append)
    assert read == [[1.0, 0.0, float("inf")], [float("inf")], [1.5, 7.0]] and deferred.pending == []
    deferred.add([], read.append)  # nothing to read: nothing kept
    assert deferred.pending == []


def test_extremes_are_finite_exactly_when_every_entry_is_and_keep_the_dtype():
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        values = torch.tensor([1.0, -2.0, 3.0], dtype=dtype)
        parts = runtime._extremes(values)
        assert [p.dtype for p in parts] == [dtype, dtype] and [p.item() for p in parts] == [-2.0, 3.0]
        for bad, kind in ((float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "inf")):
            spoiled = values.clone()
            spoiled[1] = bad
            read = [p.item() for p in runtime._extremes(spoiled)]
            assert not runtime._all_finite(read) and runtime._any_nan(read) == (kind == "nan")
    assert runtime._extremes(torch.empty(0)) == []  # nothing to read: an empty tensor is finite


@pytest.fixture
def deferred_checks(checks, monkeypatch):
    """The watch reading its checks later, as on a GPU."""
    monkeypatch.setattr(runtime, "_FORCE_DEFERRED", True)
    return checks


def test_read_later_a_gradient_born_in_the_backward_pass_is_named_at_its_forward_line(deferred_checks):
    started, recorder, _ = deferred_checks
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    hidden = x * 2.0
    root = torch.sqrt(hidden)  # the backward of sqrt at 0 is Inf from a finite gradient
    line = sys._getframe().f_lineno - 1
    (root * 3.0).sum().backward()
    assert recorder.first_nonfinite is None  # nothing is read before the batch is
    started.deferred.flush()
    event = recorder.first_nonfinite
    assert (event["phase"], event["op"], event["kind"], event["line"]) == ("backward", "SqrtBackward0", "inf", line)


def test_read_later_a_nonfinite_gradient_a_tensor_hook_returns_is_not_born_in_the_next_node(deferred_checks):
    """The received gradient of a node is read unless a hooked node of the pass made that very memory: a
    tensor hook's output is new memory, so the node after it is seen receiving the NaN, not making it."""
    started, recorder, _ = deferred_checks
    x = torch.tensor([1.0, 4.0], requires_grad=True)
    hidden = torch.exp(x)
    hidden.register_hook(lambda gradient: gradient * float("nan"))
    (hidden * 3.0).sum().backward()
    started.deferred.flush()
    assert recorder.first_nonfinite is None
    assert torch.isnan(x.grad).all()


def test_batches_still_on_their_way_are_read_later_in_order_and_a_flush_waits_for_them(monkeypatch):
    """As on a GPU, where a batch's copy lands without the program waiting: a batch is handed to its checks
    only once it has arrived and every batch before it has, and ``flush()`` (a scaler step, the exit) waits."""
    arrived = set()

    class SlowRead:
        made = 0

        def __init__(self, flat):
            self.number, SlowRead.made = SlowRead.made, SlowRead.made + 1
            self.flat = flat

        def ready(self):
            return self.number in arrived

        def values(self):
            return self.flat.tolist()

    monkeypatch.setattr(runtime, "_Read", SlowRead)
    read = []
    deferred = runtime.Deferred(every=2)

    def add(*values):
        for value in values:
            deferred.add([torch.tensor(value)], read.append)

    add(1.0, 2.0, 3.0, 4.0)
    assert read == [] and len(deferred.reading) == 2 and deferred.waiting  # two batches on their way
    arrived.add(1)
    add(5.0, 6.0)
    assert read == []  # the second batch has arrived, the first not: nothing is read out of order
    arrived.add(0)
    add(7.0, 8.0)
    assert read == [[1.0], [2.0], [3.0], [4.0]] and len(deferred.reading) == 2
    deferred.flush()
    assert read == [[float(v)] for v in range(1, 9)] and not deferred.waiting
