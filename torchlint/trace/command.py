"""``torchlint trace``: check the project statically, run the program with the findings' sites
instrumented, and report which findings the run confirmed and where the first Inf/NaN was born.

This process never imports torch: it runs the static check in-process (every confidence level of
the numerics and fused-op rules, the configuration's selection and per-file ignores applied, as
``torchlint check`` finds the project), asks ``operands`` for each finding's site, writes the plan,
and starts the traced process (``bootstrap``) on the same interpreter with this process's standard
streams and working directory.  Ctrl-C reaches the program (this process waits it out); SIGTERM is
passed on.  When the program ends, the report goes to standard error (JSON to ``--output-file``),
and ``torchlint trace`` exits as the program did.

Before any of that it fails at once (exit 2, one ``error:`` line, nothing run) when the script does not
exist or torch cannot be imported by the interpreter that would run the program: a run that could only
end in "can't open file" or ModuleNotFoundError has nothing to confirm.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.machinery
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from torchlint import config, confirmations, runner, source
from torchlint.cache_dir import default_dir as default_cache_dir
from torchlint.files import discover
from torchlint.rule import Finding
from torchlint.trace.operands import TRACED_PREFIXES, site_plans
from torchlint.trace.plan import Plan, SitePlan
from torchlint.trace.report import TraceReport, display_path

EXIT_USAGE = 2
# The traced process's first statement: make this torchlint importable there, then hand over.
_START = "import sys; sys.path.insert(0, {folder!r}); from torchlint.trace.bootstrap import main; main()"


class _CheckOnly(argparse.Namespace):
    """The options of a plain ``torchlint check`` run, for the runner: every flag it may read is off."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def run(args: argparse.Namespace) -> int:
    """``args``: ``module`` ([MODULE, ARGS...] after -m) or ``script`` ([SCRIPT, ARGS...]), ``max_steps``,
    ``stop_on_first``, ``output_format``, ``output_file``, ``config``, ``sync_every``."""
    if args.module is not None:
        if not args.module:
            return _usage("-m needs a module name")
        mode, target, arguments = "-m", args.module[0], args.module[1:]
        start = os.getcwd()
    else:
        if not args.script:
            return _usage("give a script (torchlint trace SCRIPT [ARGS...]) or a module (torchlint trace -m MODULE [ARGS...])")
        mode, target, arguments = "--", args.script[0], args.script[1:]
        start = os.path.abspath(target)
    if args.max_steps is not None and args.max_steps < 1:
        return _usage("--max-steps must be 1 or more")
    if mode == "--" and not os.path.exists(target):  # -m: the module is found by the traced process, as python -m finds it
        return _usage(f"{target}: no such file or directory")
    if not torch_importable(_program_paths(mode, target)):
        return _usage(_torch_missing_message(sys.executable))
    try:
        config_path, settings = traced_settings(start, args.config)
    except config.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    root = project_root(config_path, start)
    findings, diagnostics, project = static_findings(root, settings)
    plans, missing = site_plans(findings, settings)
    folder = tempfile.mkdtemp(prefix="torchlint-trace-")
    try:
        plan = Plan(
            results_path=os.path.join(folder, "results.json"),
            project_files=project,
            sites=sites_by_file(findings, plans),
            max_steps=args.max_steps,
            stop_on_first=args.stop_on_first,
            sync_every=args.sync_every,
        )
        plan_path = os.path.join(folder, "plan.json")
        plan.write(plan_path)
        status = _run_traced(plan_path, mode, target, arguments)
        results = _read_results(plan.results_path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    shown = [dataclasses.replace(finding, path=display_path(finding.path)) for finding in findings]
    rank = launcher_rank()
    report = TraceReport(shown, results, missing, diagnostics, args.max_steps, rank=rank)
    if args.output_file:  # JSON there, text here
        with open(rank_path(args.output_file, rank), "w", encoding="utf-8") as handle:
            handle.write(report.to_json())
    record_confirmed(report, findings, default_cache_dir(config_path, root), root)
    sys.stderr.write(report.to_json() if args.output_format == "json" and not args.output_file else report.to_text())
    return _exit_like(status)


def record_confirmed(report: TraceReport, findings: Sequence[Finding], cache_dir: str, root: str) -> None:
    """Keep what the run confirmed beside the cache, for ``check``, flake8 and the editor (confirmations.py)."""
    today = datetime.date.today().isoformat()
    found = []
    texts: Dict[str, Optional[str]] = {}
    for index, finding in enumerate(findings):
        evidence = report.confirmed_evidence(index)
        if evidence is None or finding.cell is not None or finding.path.startswith("<"):
            continue
        if finding.path not in texts:
            try:
                texts[finding.path] = source.read(finding.path).text
            except source.SourceError:
                texts[finding.path] = None
        text = texts[finding.path]
        if text is None:
            continue
        digest = confirmations.site_digest(text, finding.location.line, finding.location.end_line)
        found.append(confirmations.Confirmation(confirmations.relative(finding.path, root), finding.code, digest, evidence, today))
    try:
        confirmations.record(cache_dir, found)
    except OSError as exc:
        print(f"warning: cannot keep what the run confirmed in {cache_dir}: {exc}", file=sys.stderr)


def launcher_rank() -> Optional[int]:
    """This process's rank when a launcher started it as one of several (``torchrun``, ``accelerate launch``
    and the like set ``RANK``); None otherwise."""
    value = os.environ.get("RANK", "").strip()
    return int(value) if value.isdigit() else None


def rank_path(path: str, rank: Optional[int]) -> str:
    """``t.json`` as rank 1 writes it: ``t.rank1.json`` (each rank its own report)."""
    if rank is None:
        return path
    stem, suffix = os.path.splitext(path)
    return f"{stem}.rank{rank}{suffix}"


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def torch_importable(program_paths: Sequence[str]) -> bool:
    """Whether the program's interpreter (this one: ``_run_traced`` starts ``sys.executable`` with this
    process's environment) can import torch: from its installed packages, or from the folder the program's
    ``sys.path`` starts with (``program_paths``).  Nothing is imported (this process never imports torch)."""
    try:
        if importlib.util.find_spec("torch") is not None:
            return True
    except ValueError:  # in sys.modules without a spec: imported already
        return True
    return importlib.machinery.PathFinder.find_spec("torch", list(program_paths)) is not None


def _program_paths(mode: str, target: str) -> List[str]:
    """Where the program's ``sys.path`` starts: for -m, the working directory; for a script, its folder (a
    folder or zip run as a program: itself, which the import system passes over when it is a plain file)."""
    if mode == "-m":
        return [os.getcwd()]
    path = os.path.abspath(target)
    return [path, os.path.dirname(path)]


def _torch_missing_message(python: str) -> str:
    return (
        f"torch is not installed for {python}, the Python that would run the program; install it into that "
        f"environment (`{shlex.quote(python)} -m pip install torch`), or install torchlint into the environment "
        "that has torch, and run torchlint trace again"
    )


def project_root(config_path: Optional[str], start: str) -> str:
    """As ``torchlint check`` finds the project (files.project_files): the configuration's folder, else the
    folder of the script (for -m, the working directory)."""
    if config_path:
        return os.path.dirname(os.path.abspath(config_path))
    return start if os.path.isdir(start) else os.path.dirname(start)


def traced_settings(start: str, config_file: Optional[str] = None):
    """(configuration path or None, settings): the project's configuration at every level, the numerics and
    fused-op rules alone.  Raises config.ConfigError."""
    config_path = config.locate([start], config_file)
    settings = config.resolve(config_path, config.Overrides(confidence_level="low"))
    return config_path, dataclasses.replace(settings, enabled=frozenset(code for code in settings.enabled if code.startswith(TRACED_PREFIXES)))


def static_findings(root: str, settings: config.Settings, jobs: Optional[int] = None):
    """(findings sorted as check sorts them, diagnostics, real paths of the project's Python files)."""
    files, problems = discover([root], settings)
    findings: List[Finding] = []
    diagnostics = list(problems)
    for outcome in runner.run_files(files, [root], _CheckOnly(), settings, jobs or runner.default_jobs(), None):
        findings.extend(outcome.findings)
        diagnostics.extend(outcome.diagnostics)
    findings.sort(key=lambda f: f.sort_key)
    project = sorted({os.path.realpath(path) for path in files if path.endswith(".py")})
    return findings, diagnostics, project


def sites_by_file(findings: Sequence[Finding], plans: Dict[int, SitePlan]) -> Dict[str, List[SitePlan]]:
    sites: Dict[str, List[SitePlan]] = {}
    for index, site in sorted(plans.items()):
        sites.setdefault(os.path.realpath(findings[index].path), []).append(site)
    return sites


def _run_traced(plan_path: str, mode: str, target: str, arguments: Sequence[str]) -> int:
    """Run the traced process to its end; its exit status (negative: the signal that ended it)."""
    folder = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    command = [sys.executable, "-c", _START.format(folder=folder), plan_path, mode, target, *arguments]
    # Ctrl-C reaches the program through the terminal's process group: this process waits it out.  A
    # handler that does nothing, not SIG_IGN, which the program would inherit (handlers are reset by exec).
    previous_interrupt = signal.signal(signal.SIGINT, lambda signum, frame: None)
    process = subprocess.Popen(command)

    def pass_on(signum, frame):
        process.send_signal(signum)

    previous_terminate = signal.signal(signal.SIGTERM, pass_on)
    try:
        return process.wait()
    finally:
        signal.signal(signal.SIGINT, previous_interrupt)
        signal.signal(signal.SIGTERM, previous_terminate)


def _read_results(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _exit_like(status: int) -> int:
    """The program's exit status; a program a signal ended ends this process by the same signal."""
    if status >= 0:
        return status
    sys.stderr.flush()
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
    return 128 - status
