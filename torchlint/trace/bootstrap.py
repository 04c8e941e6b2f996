"""The traced process: run the program as ``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` would.

Started by ``torchlint trace`` as ``python -c <start> PLAN (--|-m) TARGET ARGS...``.  Before the
program runs: ``sys.argv``, ``sys.path[0]`` and a fresh ``__main__`` module are set up as the
interpreter sets them up; a meta path finder gives the project's files that have sites a loader
that compiles them instrumented (never writing bytecode: nothing on disk changes); when the
program imports torch, the finder starts the checks (``runtime``).  The program's standard
streams are the process's own.  At the end the results file is written, and the exit status is
the program's: an uncaught exception prints its traceback (without this module's frames) and exits
1, ``KeyboardInterrupt`` exits by SIGINT, ``SystemExit`` keeps its code.  A run ended by
``--max-steps`` exits 0, by ``--stop-on-first`` 1.
"""
from __future__ import annotations

import atexit
import builtins
import importlib.abc
import importlib.machinery
import os
import signal
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Sequence

from torchlint.trace import rewrite
from torchlint.trace.plan import Plan, SitePlan
from torchlint.trace.state import STOPPED_MAX_STEPS, Probes, Recorder, TraceStopped

_HERE = os.path.dirname(os.path.abspath(__file__))
# The exit status of a run that --max-steps or --stop-on-first ended.
STOPPED_EXIT = {STOPPED_MAX_STEPS: 0}
STOPPED_FIRST_EXIT = 1


class _InstrumentingLoader(importlib.machinery.SourceFileLoader):
    """A project module with sites: compiled from its instrumented tree, no bytecode cache read or written."""

    def __init__(self, fullname: str, path: str, sites: Sequence[SitePlan], recorder: Recorder, probes_name: str) -> None:
        super().__init__(fullname, path)
        self.sites = sites
        self.recorder = recorder
        self.probes_name = probes_name

    def get_code(self, fullname: str):
        path = self.get_filename(fullname)
        code, problems = rewrite.instrument(self.get_data(path), path, self.sites, self.probes_name)
        for site, reason in problems:
            self.recorder.not_instrumented[site] = reason
        return code


class _AfterImport(importlib.abc.Loader):
    """Runs ``then(module)`` once the wrapped loader has executed the module (torch, here)."""

    def __init__(self, loader: Any, then: Callable[[types.ModuleType], None]) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.then(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class Finder(importlib.abc.MetaPathFinder):
    """Gives the project's modules with sites an instrumenting loader; calls ``on_torch`` once torch is imported."""

    def __init__(
        self,
        sites: Dict[str, List[SitePlan]],
        recorder: Recorder,
        on_torch: Optional[Callable[[types.ModuleType], None]],
        probes_name: str = rewrite.PROBES_NAME,
    ) -> None:
        self.sites = sites
        self.recorder = recorder
        self.on_torch: Optional[Callable[[types.ModuleType], None]] = on_torch
        self.probes_name = probes_name

    def find_spec(self, fullname: str, path=None, target=None):
        if not self.sites and (fullname != "torch" or self.on_torch is None):
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        if fullname == "torch" and self.on_torch is not None:
            then, self.on_torch = self.on_torch, None
            spec.loader = _AfterImport(spec.loader, then)
            return spec
        origin = spec.origin
        if origin and spec.has_location and origin.endswith(".py") and isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            sites = self.sites.get(os.path.realpath(origin))
            if sites:
                spec.loader = _InstrumentingLoader(fullname, origin, sites, self.recorder, self.probes_name)
        return spec


class _Run:
    """The traced run's state, from start to the results file."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.recorder = Recorder(plan)
        self.probes = Probes()
        self.runtime: Any = None
        self.finished = False

    def start_checks(self, torch_module: types.ModuleType) -> None:
        try:
            from torchlint.trace import (
                runtime,  # torch is imported by now: the program imported it
            )

            self.runtime = runtime.activate(self.plan, self.recorder, self.probes)
        except Exception as exc:  # the program runs on, unchecked
            self.recorder.error(f"cannot start the checks: {type(exc).__name__}: {exc}")

    def finish(self) -> None:
        if self.runtime is not None:
            self.runtime.finish()
        self.recorder.write()


def main() -> None:
    sys.path.pop(0)  # the folder the start command put first to import torchlint: not the program's
    _, plan_path, mode, target, *arguments = sys.argv
    plan = Plan.read(plan_path)
    run = _Run(plan)
    setattr(builtins, rewrite.PROBES_NAME, run.probes)
    sys.meta_path.insert(0, Finder(plan.sites, run.recorder, run.start_checks))
    atexit.register(run.finish)  # registered first: runs after the program's own exit handlers
    run.recorder.write()
    try:
        if mode == "-m":
            _run_module(target, arguments)
        else:
            _run_script(target, arguments, plan, run)
    except TraceStopped as stop:
        run.recorder.stopped = stop.reason
        run.finish()
        sys.exit(STOPPED_EXIT.get(stop.reason, STOPPED_FIRST_EXIT))
    except SystemExit:
        raise
    except KeyboardInterrupt as interrupt:
        _print_exception(interrupt)
        run.finish()
        # As the interpreter does: die by SIGINT, so that the shell sees an interrupted program.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        sys.exit(130)
    except BaseException as error:
        _print_exception(error)
        sys.exit(1)


def _run_script(target: str, arguments: List[str], plan: Plan, run: _Run) -> None:
    path = os.path.abspath(target)
    sys.argv = [target, *arguments]
    if os.path.isdir(path) or (not path.endswith((".py", ".pyw")) and _is_zip(path)):
        import runpy  # a folder or zip with a __main__.py: run as the interpreter runs it (its imports are instrumented)

        sys.path[0] = path
        runpy.run_path(path, run_name="__main__")
        return
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        print(f"{sys.executable}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}", file=sys.stderr)
        sys.exit(2)
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    try:
        code, problems = rewrite.instrument(data, path, plan.sites.get(os.path.realpath(path), []))
    except (SyntaxError, ValueError) as error:
        sys.excepthook(type(error), error, None)
        sys.exit(1)
    for site, reason in problems:
        run.recorder.not_instrumented[site] = reason
    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(
        __file__=path,
        __cached__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
        __spec__=None,
        __package__=None,
        __builtins__=builtins,
    )
    sys.modules["__main__"] = main_module
    exec(code, main_module.__dict__)


def _run_module(name: str, arguments: List[str]) -> None:
    import runpy

    sys.argv = ["-m", *arguments]
    sys.path[0] = os.getcwd()
    main_module = types.ModuleType("__main__")
    main_module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_module
    runpy._run_module_as_main(name, alter_argv=True)  # what ``python -m`` itself calls


def _is_zip(path: str) -> bool:
    import zipfile

    return os.path.isfile(path) and zipfile.is_zipfile(path)


# -- the program's traceback --------------------------------------------------------------------


def _is_ours(frame: types.FrameType) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(_HERE + os.sep)


def _pruned(tb: Optional[types.TracebackType]) -> Optional[types.TracebackType]:
    """``tb`` without the frames a plain run would not have: the start command and this package's, and the
    ``handle_torch_function`` call (with the torch function's first entry) that led into the watch."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    while entries and (entries[0].tb_frame.f_code.co_filename == "<string>" or _is_ours(entries[0].tb_frame)):
        entries.pop(0)  # the start command and this module
    kept: List[types.TracebackType] = []
    for entry in entries:
        if _is_ours(entry.tb_frame):
            if kept and kept[-1].tb_frame.f_code.co_name == "handle_torch_function":
                kept.pop()
                if kept:
                    kept.pop()
            continue
        kept.append(entry)
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def _prune_all(error: BaseException, seen: Optional[set] = None) -> None:
    seen = set() if seen is None else seen
    if id(error) in seen:
        return
    seen.add(id(error))
    error.__traceback__ = _pruned(error.__traceback__)
    for linked in (error.__cause__, error.__context__):
        if linked is not None:
            _prune_all(linked, seen)
    for inner in getattr(error, "exceptions", ()) or ():
        if isinstance(inner, BaseException):
            _prune_all(inner, seen)


def _print_exception(error: BaseException) -> None:
    _prune_all(error)
    sys.excepthook(type(error), error, error.__traceback__)
