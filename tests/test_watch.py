"""``torchlint.watch()`` and the IPython magics: ``torchlint trace``'s checks over a block of a running program.

Each case runs a small program in a fresh interpreter (a watch instruments modules as they are imported, and
that must not leak into the test process).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

LOSSES = """\
import torch


def contrastive(a, b):
    distance = (a - b).pow(2).sum(1).sqrt()
    return distance.mean()
"""


def project(tmp_path: Path, program: str) -> Path:
    """A project with a module of losses (a TL101 site) and ``run.py``."""
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (tmp_path / "losses.py").write_text(LOSSES, encoding="utf-8")
    (tmp_path / "run.py").write_text(textwrap.dedent(program), encoding="utf-8")
    return tmp_path


def python(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *arguments], cwd=folder, capture_output=True, text=True, timeout=300)


def test_importing_torchlint_imports_no_torch(tmp_path):
    proc = python(tmp_path, "-c", "import sys, torchlint; torchlint.watch; print('torch' in sys.modules)")
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_a_block_is_watched_and_reported_like_a_traced_run(tmp_path):
    folder = project(
        tmp_path,
        """
        import json, sys
        import torch
        import torchlint

        with torchlint.watch(output_file="w.json") as seen:
            from losses import contrastive
            net = torch.nn.Linear(4, 4)
            x = torch.randn(8, 4)
            loss = contrastive(net(x), net(x.clone()))
            loss.backward()
        print(json.dumps({"first": seen.first_nonfinite, "findings": seen.findings, "run": seen.run}))
        """,
    )
    proc = python(folder, "run.py")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    first = seen["first"]
    assert (first["path"], first["line"], first["op"], first["kind"]) == ("losses.py", 5, "SqrtBackward0", "inf")
    (finding,) = seen["findings"]
    assert finding["code"] == "TL101" and finding["confirmed"] and finding["evidence"]["gradient"]["kind"] == "inf"
    written = json.loads((folder / "w.json").read_text(encoding="utf-8"))
    assert written["first_nonfinite"] == first and written["findings"] == seen["findings"]
    assert proc.stderr.startswith("torchlint watch: 1 of 1 finding confirmed in this run")
    assert "first non-finite value: inf in the gradient of SqrtBackward0 at losses.py:5" in proc.stderr


def test_a_decorated_function_computes_what_it_computes_unwatched(tmp_path):
    folder = project(
        tmp_path,
        """
        import sys
        import torch
        import torchlint

        def train(steps=3):
            from losses import contrastive
            torch.manual_seed(0)
            net = torch.nn.Linear(4, 4)
            optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
            for _ in range(steps):
                x = torch.randn(8, 4)
                loss = contrastive(net(x), net(x + 1.0))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            return [p.detach().clone() for p in net.parameters()]

        watched = sys.argv[1]
        if watched == "bare":
            train = torchlint.watch(train)
        elif watched == "called":
            train = torchlint.watch()(train)
        weights = train()
        print(" ".join(repr(v) for p in weights for v in p.flatten().tolist()))
        """,
    )
    plain = python(folder, "run.py", "plain")
    assert plain.returncode == 0, plain.stderr
    for form in ("bare", "called"):
        watched = python(folder, "run.py", form)
        assert watched.returncode == 0, watched.stderr
        assert watched.stdout == plain.stdout  # bitwise the same weights
        assert "TL101 not reached in this run (ran 3 times" in watched.stderr
        assert "first non-finite value: none" in watched.stderr


def test_stop_on_first_raises_an_error_that_names_the_line(tmp_path):
    folder = project(
        tmp_path,
        """
        import torch
        import torchlint

        try:
            with torchlint.watch(stop_on_first=True):
                counts = torch.zeros(3)
                share = counts / counts.sum()
                print("not reached")
        except torchlint.NonFiniteValueError as error:
            print("stopped:", str(error).splitlines()[0])
        """,
    )
    proc = python(folder, "run.py")
    assert proc.returncode == 0, proc.stderr
    assert "not reached" not in proc.stdout
    assert "stopped: first non-finite value: nan from Tensor.div (forward) at run.py:8" in proc.stdout


def test_a_module_imported_before_the_watch_is_listed_as_not_instrumented(tmp_path):
    folder = project(
        tmp_path,
        """
        import torch
        import torchlint
        from losses import contrastive

        with torchlint.watch() as seen:
            contrastive(torch.ones(2, 3), torch.ones(2, 3))
        (finding,) = seen.findings
        print(finding["confirmed"], finding["evidence"]["reason"])
        """,
    )
    proc = python(folder, "run.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False imported before the watch started: its code runs as it was loaded"


def test_a_watch_inside_a_watch_is_refused(tmp_path):
    folder = project(
        tmp_path,
        """
        import torchlint

        with torchlint.watch():
            try:
                with torchlint.watch():
                    pass
            except RuntimeError as error:
                print(error)
        """,
    )
    proc = python(folder, "run.py")
    assert proc.stdout.strip() == "torchlint.watch: a watch is already running on this thread", proc.stderr


# -- IPython -----------------------------------------------------------------------------------

SESSION = """
import sys
from IPython.testing.globalipapp import start_ipython

shell = start_ipython()
shell.run_line_magic("load_ext", "torchlint")

def run(cell):
    result = shell.run_cell(cell)
    sys.stdout.flush()
    sys.stderr.write("=== end of cell\\n")
    sys.stderr.flush()
    return result

run("import torch\\nimport torch.nn.functional as F\\nx = torch.zeros(3, requires_grad=True)")
out = run("%%torchlint_trace\\ny = torch.sqrt(x)\\ny.sum().backward()\\nx.grad")
print("OUT", out.result.tolist())
run("%torchlint_trace on")
run("z = torch.zeros(2, requires_grad=True)\\nw = F.softmax(z, 0)\\nloss = torch.log(z).sum()\\nloss.backward()")
run("ok = torch.ones(2).sum()")
run("%torchlint_trace off")
run("unwatched = torch.log(torch.zeros(1))")
stopped = run("%%torchlint_trace --stop-on-first\\nq = torch.zeros(2)\\nv = q / q\\nprint('after')")
print("ERROR", type(stopped.error_in_exec).__name__)
"""


def test_ipython_cells_are_watched_with_their_own_findings_instrumented(tmp_path):
    pytest.importorskip("IPython")
    (tmp_path / "session.py").write_text(SESSION, encoding="utf-8")
    proc = python(tmp_path, "session.py")
    assert proc.returncode == 0, proc.stderr
    cells = proc.stderr.split("=== end of cell\n")
    one_cell, on, watched, clean, off, unwatched, stopped = cells[1:8]
    # %%torchlint_trace: the cell's own sqrt is a finding, confirmed; its last value is the cell's output.
    assert "torchlint watch: 1 of 1 finding confirmed" in one_cell
    assert ">:1:5: TL101 confirmed" in one_cell
    assert "first non-finite value: inf in the gradient of SqrtBackward0 at <ipython-input-" in one_cell
    assert "OUT [inf, inf, inf]" in proc.stdout
    # %torchlint_trace on: every following cell, with what earlier cells imported known to the check.
    assert "TL102 confirmed" in watched and ":3:" in watched and "first non-finite value: inf from torch.log" in watched
    assert "torchlint watch: no numerics or fused-op findings" in clean and "first non-finite value: none" in clean
    assert "torchlint watch" not in off + unwatched
    assert "first non-finite value: nan from Tensor.div (forward)" in stopped
    assert "after" not in proc.stdout.splitlines()  # the cell stopped at the division
    assert "ERROR NonFiniteValueError" in proc.stdout
