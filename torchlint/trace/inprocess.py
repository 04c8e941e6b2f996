"""``torchlint.watch()``: the checks of ``torchlint trace`` over a block of the running program.

What ``trace`` does in two processes, a watch does in one, around a ``with`` block or a decorated
function: the static check of the project (found from the file that called ``watch``, else the working
directory), the sites of its numerics and fused-op findings instrumented in the project's modules that
the block imports, the watch over every torch op (``runtime``), and at the end the report of ``trace``
printed to standard error (its JSON written to ``output_file``).  The block's own file, and modules
imported before the watch started, run as they are: their sites are listed as not instrumented.

torch is imported when a watch starts, never by ``import torchlint``.  Each watch reaches its probes
by a builtin name of its own, so that a module instrumented by an earlier watch never reports into a
later one (after its watch, its probes pass values through).
"""
from __future__ import annotations

import builtins
import contextlib
import dataclasses
import itertools
import os
import sys
import threading
import types
from typing import Any, Dict, List, Optional

from torchlint import engine
from torchlint.cache_dir import default_dir as default_cache_dir
from torchlint.rule import Finding
from torchlint.trace import command
from torchlint.trace.operands import TRACED_PREFIXES, site_plans
from torchlint.trace.plan import Plan, SitePlan
from torchlint.trace.rewrite import PROBES_NAME, instrument_tree
from torchlint.trace.report import TraceReport, display_path
from torchlint.trace.state import STOPPED_FIRST_NONFINITE, Probes, Recorder, TraceStopped

_NUMBERS = itertools.count(1)
_ACTIVE = threading.local()  # the watch running on this thread, if any
IMPORTED_BEFORE = "imported before the watch started: its code runs as it was loaded"


class NonFiniteValueError(RuntimeError):
    """Raised by a watch with ``stop_on_first=True`` at the first non-finite value; the message names its line."""


@dataclasses.dataclass
class WatchResult:
    """What a watch saw: every finding of the project with ``confirmed`` and ``evidence`` (the keys of
    ``torchlint trace --output-file``), the first non-finite value (None when every value stayed finite),
    the run's counts, and the text report.  Filled when the block ends."""

    findings: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    first_nonfinite: Optional[Dict[str, Any]] = None
    run: Dict[str, Any] = dataclasses.field(default_factory=dict)
    text: str = ""


@dataclasses.dataclass
class Prepared:
    """The static side of a watch: the project's findings, their sites by file, and why some have none."""

    findings: List[Finding]
    diagnostics: List[Any]
    project: List[str]
    settings: Any
    sites: Dict[str, List[SitePlan]]
    missing: Dict[int, str]
    root: str = ""
    cache_dir: str = ""  # where what the watch confirms is kept (confirmations.py)


def prepare(start: str) -> Prepared:
    """The static check of the project ``start`` lies in (as ``torchlint trace`` finds it).  Raises
    config.ConfigError for a bad configuration."""
    config_path, settings = command.traced_settings(start)
    root = command.project_root(config_path, start)
    findings, diagnostics, project = command.static_findings(root, settings, jobs=1)
    plans, missing = site_plans(findings, settings)
    sites = command.sites_by_file(findings, plans)
    return Prepared(findings, list(diagnostics), project, settings, sites, missing, root, default_cache_dir(config_path, root))


def with_cell(prepared: Prepared, name: str, text: str, prelude: str = "") -> Prepared:
    """``prepared`` and the findings of one notebook cell, ``text`` as Python runs it under the code name ``name``
    (their sites are instrumented in the cell's tree, not by an import).  ``prelude``: lines that bind what
    earlier cells imported (``import torch.nn.functional as F``), checked with the cell, reported never."""
    shift = prelude.count("\n")
    result = engine.lint_text(prelude + text, name, prepared.settings)
    cell_findings = sorted(
        (_moved_up(f, shift) for f in result.findings if f.code.startswith(TRACED_PREFIXES) and f.location.line > shift),
        key=lambda f: f.sort_key,
    )
    offset = len(prepared.findings)
    plans, missing = site_plans(cell_findings, prepared.settings, texts={name: text})
    sites = dict(prepared.sites)
    sites[name] = [dataclasses.replace(site, site=site.site + offset) for _, site in sorted(plans.items())]
    return Prepared(
        prepared.findings + cell_findings,
        prepared.diagnostics + list(result.diagnostics),
        prepared.project + [name],
        prepared.settings,
        sites,
        {**prepared.missing, **{index + offset: reason for index, reason in missing.items()}},
        prepared.root,
        prepared.cache_dir,
    )


def _moved_up(finding: Finding, lines: int) -> Finding:
    """``finding`` with its lines counted from ``lines`` further down (its fix dropped: a watch applies none)."""
    if not lines:
        return finding
    where = finding.location
    location = dataclasses.replace(where, line=where.line - lines, end_line=where.end_line - lines)
    return dataclasses.replace(finding, location=location, fix=None)


def import_prelude(namespace: Dict[str, Any]) -> str:
    """Import statements that bind the modules ``namespace`` holds, by the names it holds them under."""
    lines = []
    for name, value in namespace.items():
        if isinstance(value, types.ModuleType) and name.isidentifier() and not name.startswith("_"):
            module = value.__name__
            lines.append(f"import {module}\n" if module == name else f"import {module} as {name}\n")
    return "".join(sorted(lines))


class Watching(contextlib.ContextDecorator):
    """The object ``torchlint.watch(...)`` returns (see the module docs)."""

    def __init__(
        self,
        output_file: Optional[str] = None,
        stop_on_first: bool = False,
        start: Optional[str] = None,
        prepared: Optional[Prepared] = None,
        quiet: bool = False,
    ) -> None:
        self.output_file = output_file
        self.stop_on_first = stop_on_first
        self.start = start or os.getcwd()
        self.prepared = prepared
        self.quiet = quiet
        self.result = WatchResult()
        # The builtin the code this watch instruments calls its probes by.
        self.probes_name = f"__torchlint_watch_{next(_NUMBERS)}__"
        self._state: Optional[Dict[str, Any]] = None

    # -- start ----------------------------------------------------------------------------------

    def __enter__(self) -> WatchResult:
        if getattr(_ACTIVE, "watch", None) is not None:
            raise RuntimeError("torchlint.watch: a watch is already running on this thread")
        if isinstance(getattr(builtins, PROBES_NAME, None), Probes):
            raise RuntimeError("torchlint.watch: this program already runs under torchlint trace")
        self.result = WatchResult()
        prepared = self.prepared if self.prepared is not None else prepare(self.start)
        missing = dict(prepared.missing)
        loaded = _loaded_files()
        sites = {}
        for path, file_sites in prepared.sites.items():
            if path in loaded:
                missing.update((site.site, IMPORTED_BEFORE) for site in file_sites)
            else:
                sites[path] = file_sites
        plan = Plan(results_path="", project_files=prepared.project, sites=sites, stop_on_first=self.stop_on_first)
        recorder = Recorder(plan)
        probes = Probes()
        setattr(builtins, self.probes_name, probes)

        from torchlint.trace.bootstrap import Finder

        finder = Finder(sites, recorder, None, self.probes_name)
        sys.meta_path.insert(0, finder)
        try:
            import torch  # noqa: F401  (the program's torch: the watch needs it now)

            from torchlint.trace import runtime

            started = runtime.activate(plan, recorder, probes)
        except BaseException:
            sys.meta_path.remove(finder)
            setattr(builtins, self.probes_name, Probes())
            raise
        self._state = {
            "prepared": prepared,
            "missing": missing,
            "recorder": recorder,
            "finder": finder,
            "runtime": started,
        }
        _ACTIVE.watch = self
        return self.result

    def instrument(self, tree: Any, name: str, text: str) -> None:
        """Instrument a cell's tree (``text`` as Python runs it under ``name``) with the sites planned for it."""
        state = self._state
        if state is None:
            return
        sites = state["prepared"].sites.get(name, [])
        if sites:
            for site, reason in instrument_tree(tree, text, sites, self.probes_name):
                state["recorder"].not_instrumented[site] = reason

    # -- end ------------------------------------------------------------------------------------

    def __exit__(self, kind, error, traceback) -> bool:
        state, self._state = self._state, None
        _ACTIVE.watch = None
        if state is None:
            return False
        try:
            state["runtime"].close()
        finally:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(state["finder"])
            setattr(builtins, self.probes_name, Probes())  # instrumented modules pass values through from now on
        stopped = isinstance(error, TraceStopped)
        recorder: Recorder = state["recorder"]
        if stopped:
            recorder.stopped = error.reason
        prepared: Prepared = state["prepared"]
        shown = [dataclasses.replace(finding, path=display_path(finding.path)) for finding in prepared.findings]
        report = TraceReport(shown, recorder.results(), state["missing"], prepared.diagnostics, tool="torchlint watch")
        document = report.document()
        self.result.findings = document["findings"]
        self.result.first_nonfinite = document["first_nonfinite"]
        self.result.run = document["run"]
        self.result.text = report.to_text()
        if self.output_file:
            with open(self.output_file, "w", encoding="utf-8") as handle:
                handle.write(report.to_json())
        if prepared.cache_dir:
            command.record_confirmed(report, prepared.findings, prepared.cache_dir, prepared.root)
        if not self.quiet:
            sys.stderr.write(self.result.text)
        if stopped and error.reason == STOPPED_FIRST_NONFINITE:
            raise NonFiniteValueError(report.first_words()) from None
        return False


def _loaded_files() -> set:
    """Real paths of the source files of the modules imported so far."""
    files = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.endswith(".py"):
            files.add(os.path.realpath(name))
    return files


def watch(output_file: Any = None, stop_on_first: bool = False) -> Any:
    """See ``torchlint.watch``."""
    caller = sys._getframe(2).f_code.co_filename
    start = os.path.dirname(os.path.abspath(caller)) if caller and not caller.startswith("<") and os.path.exists(caller) else None
    if callable(output_file):  # @torchlint.watch without parentheses
        return Watching(start=start)(output_file)
    return Watching(output_file=output_file, stop_on_first=stop_on_first, start=start)

