"""Runtime claims that only a GPU can show, checked on one when a session is lent it (`device` tool).

    python3 bench/gpu_checks.py [--output FILE]

The CPU test suite proves every rule's claim it can: these are the ones about CUDA itself. Each check runs
the bad form and the form the codemod writes (the fixtures' ``.out.py`` text, already checked by the
codemod fixture tests, so torchlint itself need not be installed there) and prints one line per claim.

- TL401: a checkpoint saved from the GPU and loaded without ``map_location`` on a machine without one
  (a child process with ``CUDA_VISIBLE_DEVICES=""``) raises; with ``map_location="cpu"`` it loads the same
  values.
- TL307: ``nn.Parameter(t).to("cuda")`` / ``.cuda()`` is a copy the module does not register; moved inside
  ``Parameter(...)`` it is registered and trained.
- TL602: ``torch.cuda.amp.autocast()`` and the rewrite ``torch.amp.autocast("cuda")`` give the same dtype
  and bitwise the same values on the GPU; ``torch.cuda.amp.GradScaler()`` warns, ``torch.amp.GradScaler("cuda")``
  does not.
- TL602: the legacy ``torch.cuda.FloatTensor(...)`` constructors (deprecated in 2.1) warn when called; a reference to
  the class (``x.type(torch.cuda.FloatTensor)``) does not, which is why the rule flags calls only.
- TL401: ``map_location="cuda"`` fails where no GPU is visible; the fix that loads on the CPU and lets
  ``load_state_dict`` copy into the GPU model gives the same weights on the GPU.
- trace: the watch reads each CUDA tensor's least and greatest entry (``torch.aminmax``, one reduction in the
  tensor's own dtype): both are finite exactly when every entry is, in fp32, bf16 and fp16; a gradient born
  Inf on the GPU (the backward of ``sqrt`` at 0) is named at its forward line, and ``--stop-on-first`` stops
  the run in that step (needs torchlint importable: run from the repository with it on ``PYTHONPATH``).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import torch.nn as nn

RESULTS = []


def claim(name: str, holds: bool, detail: str) -> None:
    RESULTS.append((name, holds, detail))
    print(f"{'PASS' if holds else 'FAIL'} {name}: {detail}", flush=True)


def load_without_a_gpu(path: Path, map_location: str | None) -> subprocess.CompletedProcess:
    keyword = "" if map_location is None else f", map_location={map_location!r}"
    code = f"import torch; s = torch.load({str(path)!r}{keyword}); v = next(iter(s.values())); print(v.device, v.tolist())"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def check_tl401() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ckpt.pt"
        weights = torch.arange(3, dtype=torch.float32, device="cuda")
        torch.save({"w": weights}, path)
        bad = load_without_a_gpu(path, None)
        claim(
            "TL401 load without map_location on a machine without the GPU raises",
            bad.returncode != 0 and "deserialize object on a CUDA device" in bad.stderr,
            (bad.stderr.strip().splitlines() or ["(no error)"])[-1][:160],
        )
        good = load_without_a_gpu(path, "cpu")
        claim(
            "TL401 the fix map_location='cpu' loads the same values there",
            good.returncode == 0 and good.stdout.strip() == "cpu [0.0, 1.0, 2.0]",
            good.stdout.strip() or good.stderr.strip()[-160:],
        )


class MovedAfterWrapping(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3)).to("cuda")
        self.bias = nn.Parameter(torch.zeros(3)).cuda()


class MovedInside(nn.Module):  # what TL307's fix writes
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3).to("cuda"))
        self.bias = nn.Parameter(torch.zeros(3).cuda())


def check_tl307() -> None:
    bad, good = MovedAfterWrapping(), MovedInside()
    claim(
        "TL307 a Parameter moved to the GPU after wrapping is not registered",
        [n for n, _ in bad.named_parameters()] == [] and not bad.scale.is_leaf,
        f"registered: {[n for n, _ in bad.named_parameters()]}, scale is_leaf={bad.scale.is_leaf}",
    )
    optimizer = torch.optim.SGD(good.parameters(), lr=0.5)
    x = torch.randn(4, 3, device="cuda")
    before = (x * good.scale + good.bias).detach().clone()
    ((x * good.scale + good.bias - 1) ** 2).mean().backward()
    optimizer.step()
    claim(
        "TL307 the fix registers both on the GPU and training moves them",
        sorted(n for n, _ in good.named_parameters()) == ["bias", "scale"]
        and good.scale.device.type == "cuda"
        and not torch.equal(before, (x * good.scale + good.bias).detach()),
        f"registered: {sorted(n for n, _ in good.named_parameters())}, device {good.scale.device}",
    )
    try:
        torch.optim.SGD([nn.Parameter(torch.ones(3)).cuda()], lr=0.1)
        raised = ""
    except ValueError as error:
        raised = str(error)
    claim("TL307 an optimizer refuses the moved copy", "non-leaf" in raised, raised[:120])


def check_tl602_amp() -> None:
    a = torch.randn(64, 64, device="cuda")
    b = torch.randn(64, 64, device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cuda.amp.autocast():
            old = a @ b
        old_scaler = torch.cuda.amp.GradScaler()
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        with torch.amp.autocast("cuda"):
            new = a @ b
        new_scaler = torch.amp.GradScaler("cuda")
    claim(
        "TL602 torch.amp.autocast('cuda') computes what torch.cuda.amp.autocast() did",
        old.dtype == new.dtype == torch.float16 and torch.equal(old, new),
        f"dtypes {old.dtype} / {new.dtype}, equal={torch.equal(old, new)}",
    )
    deprecated = [str(w.message) for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    remaining = [str(w.message) for w in quiet if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    claim(
        "TL602 the old autocast and GradScaler warn, the rewrites do not",
        len(deprecated) >= 2 and not remaining and old_scaler.get_scale() == new_scaler.get_scale(),
        f"old: {len(deprecated)} deprecation warnings; new: {len(remaining)}",
    )


def check_tl602_cuda_constructors() -> None:
    with warnings.catch_warnings(record=True) as called:
        warnings.simplefilter("always")
        made = torch.cuda.FloatTensor(2, 3)
    with warnings.catch_warnings(record=True) as referenced:
        warnings.simplefilter("always")
        converted = torch.zeros(2, 3).type(torch.cuda.FloatTensor)
    said = [str(w.message) for w in called]
    claim(
        "TL602 calling torch.cuda.FloatTensor warns that the constructors are no longer recommended",
        made.is_cuda and any("no longer recommended" in text for text in said),
        (said or ["(no warning)"])[0][:120],
    )
    claim(
        "TL602 a reference to the class does not warn",
        converted.is_cuda and not [w for w in referenced if "no longer recommended" in str(w.message)],
        f"{len(referenced)} warnings",
    )


def check_tl401_cuda_map_location() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "weights.pt"
        torch.save(nn.Linear(3, 2).state_dict(), path)
        bad = load_without_a_gpu(path, "cuda")
        claim(
            "TL401 map_location='cuda' fails where no GPU is visible",
            bad.returncode != 0 and "CUDA" in bad.stderr,
            (bad.stderr.strip().splitlines() or ["(no error)"])[-1][:160],
        )
        on_gpu = nn.Linear(3, 2).cuda()
        on_gpu.load_state_dict(torch.load(path, map_location="cuda"))
        fixed = nn.Linear(3, 2).cuda()
        fixed.load_state_dict(torch.load(path, map_location="cpu"))  # what the fix writes
        same = all(torch.equal(a, b) for a, b in zip(on_gpu.state_dict().values(), fixed.state_dict().values()))
        claim(
            "TL401 the fix map_location='cpu' into load_state_dict gives the same weights on the GPU",
            same and fixed.weight.is_cuda,
            f"equal={same}, device {fixed.weight.device}",
        )


TRACED_ON_CUDA = """\
import torch

x = torch.tensor([0.0, 1.0, 4.0], device="cuda")
weight = torch.nn.Parameter(torch.ones(3, device="cuda"))
optimizer = torch.optim.SGD([weight], lr=0.1)
for step in range(3):
    root = torch.sqrt(x * weight)
    loss = root.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("finished all steps")
"""


def check_trace_on_cuda() -> None:
    import json

    wrong = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        clean = torch.randn(1 << 20, device="cuda").to(dtype)
        if not all(torch.isfinite(v).item() for v in torch.aminmax(clean)):
            wrong.append(f"{dtype} finite")
        for bad in (float("nan"), float("inf"), float("-inf")):
            spoiled = clean.clone()
            spoiled[12345] = bad
            least, greatest = torch.aminmax(spoiled)
            finite = bool(torch.isfinite(least).item() and torch.isfinite(greatest).item())
            nan = bool(torch.isnan(least).item() or torch.isnan(greatest).item())
            if finite or nan != (bad != bad):
                wrong.append(f"{dtype} {bad}")
    claim("trace: aminmax on CUDA is finite exactly when every entry is (fp32, bf16, fp16)", not wrong, ", ".join(wrong) or "9 spoiled tensors seen, 3 clean ones passed")
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
        (Path(folder) / "train.py").write_text(TRACED_ON_CUDA, encoding="utf-8")
        line = TRACED_ON_CUDA.splitlines().index("    root = torch.sqrt(x * weight)") + 1
        for extra, ends in (([], 0), (["--stop-on-first"], 1)):
            command = [sys.executable, "-m", "torchlint", "trace", *extra, "--output-file", "t.json", "train.py"]
            proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300)
            report = json.loads((Path(folder) / "t.json").read_text(encoding="utf-8")) if (Path(folder) / "t.json").exists() else {}
            first = report.get("first_nonfinite") or {}
            named = (first.get("line"), first.get("phase"), first.get("op"), first.get("kind"))
            finished = "finished all steps" in proc.stdout
            steps = report.get("run", {}).get("optimizer_steps")
            claim(
                f"trace{' --stop-on-first' if extra else ''}: a gradient born Inf on the GPU is named at its forward line"
                + (", and the run stops in that step" if extra else ""),
                named == (line, "backward", "SqrtBackward0", "inf") and proc.returncode == ends and finished == (not extra),
                f"exit {proc.returncode}, first non-finite {named}, optimizer steps {steps}, program finished: {finished}"
                + ("" if proc.returncode == ends else f"; {proc.stderr.strip().splitlines()[-1:]}"),
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check here")
        return 2
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    for check in (check_tl401, check_tl307, check_tl602_amp, check_tl602_cuda_constructors, check_tl401_cuda_map_location, check_trace_on_cuda):
        try:
            check()
        except Exception as error:  # one broken check must not hide the others
            claim(check.__name__, False, f"{type(error).__name__}: {error}")
    if args.output:
        lines = [f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", ""]
        lines += [f"- {'PASS' if ok else 'FAIL'} {name}: {detail}" for name, ok, detail in RESULTS]
        args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0 if all(ok for _, ok, _ in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
