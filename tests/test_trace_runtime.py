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
