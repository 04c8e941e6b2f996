"""Command line: argument parsing, the run over files, and exit codes.

Exit codes: 0 nothing found, 1 findings remain (or a fix was applied with
--exit-non-zero-on-fix, or --diff would change something), 2 a usage,
configuration, read, parse or internal error (findings in other files are
still reported).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from dataclasses import replace
from typing import Dict, Iterator, List, Optional, Sequence

from torchlint import cache, collection, config, registry, runner, source
from torchlint.version import __version__
from torchlint.cache import Cache
from torchlint.cache import default_dir as default_cache_dir
from torchlint.docs import page
from torchlint.files import discover
from torchlint.report import TEXT_FORMATS, RunSummary, fix_enumeration, formatters, position, statistics_formatters
from torchlint.rule import Confidence, Diagnostic

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _selector_list(value: str) -> List[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint",
        description="Find and fix PyTorch code that produces NaN/Inf gradients, cuts the autograd graph, or breaks on another machine.",
    )
    parser.add_argument("--version", action="version", version=f"torchlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    check = sub.add_parser("check", help="lint files and folders (and fix them with --fix)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to lint ('-' reads standard input); default: .")
    check.add_argument("--fix", action="store_true", help="apply safe and numerics fixes")
    unsafe = check.add_mutually_exclusive_group()
    unsafe.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true", default=None, help="also apply unsafe fixes")
    unsafe.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false", help="never apply unsafe fixes")
    check.add_argument("--diff", action="store_true", help="print the fixes as a unified diff and write nothing")
    check.add_argument(
        "--add-noqa",
        action="store_true",
        help="silence every finding: add '# noqa: CODES' where it is reported, merged into an existing '# noqa: ...'; "
        "changes nothing else",
    )
    check.add_argument(
        "--select",
        type=_selector_list,
        action="append",
        help="codes, prefixes (TL2), names or ALL; replaces the configured selection (repeat it or use commas to give several)",
    )
    check.add_argument("--extend-select", type=_selector_list, action="append", default=[], help="add to the selection")
    check.add_argument(
        "--ignore", "--extend-ignore", dest="ignore", type=_selector_list, action="append", default=[],
        help="remove from the selection, on top of the configured ignore (--extend-ignore: the same, as flake8 spells it)",
    )
    check.add_argument(
        "--fixable", type=_selector_list, action="append",
        help="only these codes' fixes are offered and applied (replaces the configured fixable; default ALL)",
    )
    check.add_argument(
        "--unfixable", type=_selector_list, action="append", default=[],
        help="these codes are reported without their fix (adds to the configured unfixable)",
    )
    check.add_argument("--show-files", action="store_true", help="list the files that would be checked, then stop")
    check.add_argument("--show-settings", action="store_true", help="print the settings that apply (after the config and the options), then stop")
    check.add_argument(
        "--confidence-level",
        metavar="LEVEL",
        choices=("low", "medium", "high", "all"),
        help="report findings of this confidence or higher: low (or all), medium, high (the default)",
    )
    check.add_argument(
        "--output-format",
        choices=sorted(formatters()),
        default="concise",
        help="concise (the default; 'text' is its old name): one line per finding; full: also the source lines with "
        "carets under the finding and its fix; json; sarif; github",
    )
    check.add_argument(
        "--statistics", action="store_true", help="print how many findings each rule has (most first) instead of the findings"
    )
    check.add_argument(
        "--show-fixes",
        action="store_true",
        help="with --fix, list the fixes applied in each file (with --diff, those it would apply); "
        "fixable findings are always marked [*] and counted",
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings remain (errors still exit 2)")
    check.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when a fix was applied, even if nothing remains")
    check.add_argument(
        "--target-torch-version",
        metavar="VERSION",
        help="check for this torch release (e.g. 2.4; default: target-torch-version in the config, else the newest)",
    )
    check.add_argument("--config", metavar="FILE", help="read [tool.torchlint] from FILE instead of the nearest pyproject.toml")
    check.add_argument("--stdin-filename", metavar="NAME", help="the name of the file read from standard input")
    check.add_argument("--force-exclude", action="store_true", help="apply exclude patterns to files named on the command line too")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    check.add_argument("--cache-dir", metavar="DIR", help="where the cache lives (default: .torchlint_cache next to the config file, else here)")
    check.add_argument("--jobs", "-j", type=_positive_int, default=None, metavar="N", help="processes to check files with (default: the number of CPUs)")
    check.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary line")

    rule = sub.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("rule", metavar="CODE_OR_NAME")

    sub.add_parser("rules", help="list every rule with its fix class")

    sub.add_parser(
        "server",
        help='run the language server for editors over standard input and output (needs "torchlint[server]")',
        description="A language server (LSP 3.17) over standard input and output: point the editor at "
        "`torchlint server` and it starts the server itself. Diagnostics as you type, quick fixes, fix-all "
        "(source.fixAll.torchlint), `# noqa` actions and hovers, on Python files and notebooks. Settings come "
        "from the nearest pyproject.toml's [tool.torchlint], as for `torchlint check`, and are re-read when it "
        "changes. It needs pygls and lsprotocol: pip install \"torchlint[server]\" (from a clone: "
        "pip install \".[server]\").",
    )

    trace = sub.add_parser(
        "trace",
        help="run a program with the numerics and fused-op findings checked at run time; name the line of the first Inf/NaN",
        description="Run SCRIPT (or -m MODULE) as python would, report which findings the run confirmed and where the "
        "first Inf/NaN was born. Options go before SCRIPT; what follows it is the program's.",
    )
    trace.add_argument("--max-steps", type=_positive_int, metavar="N", help="stop after N optimizer steps (a program that steps no optimizer: N backward passes)")
    trace.add_argument("--stop-on-first", action="store_true", help="stop at the first non-finite value")
    trace.add_argument("--output-format", choices=("text", "json"), default="text", help="the report on standard error: text or json")
    trace.add_argument("--output-file", metavar="FILE", help="write the JSON report to FILE (the text report still goes to standard error)")
    trace.add_argument("--config", metavar="FILE", help="read [tool.torchlint] from FILE instead of the nearest pyproject.toml")
    trace.add_argument("--sync-every", type=_positive_int, default=256, metavar="N", help="read checks of GPU tensors every N ops (default 256)")
    trace.add_argument("-m", dest="module", nargs=argparse.REMAINDER, help="-m MODULE [ARGS...]: run a module, as python -m does")
    trace.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    with _closed_pipe_ignored():  # --help and usage errors print too
        args = build_parser().parse_args(argv)
    # The server's standard output is its protocol, and trace's is the program's: they keep their own.
    if args.command == "server":
        from torchlint.server import main as serve  # pygls only for the server

        return serve()
    if args.command == "trace":
        from torchlint.trace.command import run as trace  # LibCST: only for trace

        return trace(args)
    with _closed_pipe_ignored():
        return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    if args.command == "rule":
        return _show_rule(args.rule)
    if args.command == "rules":
        return _list_rules()
    previous = _terminate_like_interrupt()
    try:
        return _check(args)
    except KeyboardInterrupt:
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _PipeGuard:
    """A standard stream that a closed pipe cannot break (``torchlint rules | head -1``).

    At the first BrokenPipeError the stream's file descriptor is pointed at os.devnull, as Python's
    documentation of SIGPIPE advises (so the interpreter's last flush at exit finds nothing to complain
    about), and the rest of the output is dropped: the command runs to its end and exits with the code
    its findings give.  A stream and its ``buffer`` share one state.
    """

    def __init__(self, stream, state: Optional[dict] = None) -> None:
        self._stream = stream
        self._state = state if state is not None else {"closed": False}

    def write(self, data):
        if not self._state["closed"]:
            try:
                return self._stream.write(data)
            except BrokenPipeError:
                self._reader_gone()
        return len(data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._state["closed"]:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    @property
    def buffer(self) -> "_PipeGuard":
        return _PipeGuard(self._stream.buffer, self._state)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def _reader_gone(self) -> None:
        self._state["closed"] = True
        try:
            descriptor = self._stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's stream): dropping the output is enough
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, descriptor)
        finally:
            os.close(devnull)


@contextlib.contextmanager
def _closed_pipe_ignored() -> Iterator[None]:
    """Within the block, output to a reader that went away (``| head -1``) is dropped instead of raising."""
    saved_out, saved_err = sys.stdout, sys.stderr
    out = sys.stdout = _PipeGuard(saved_out)
    err = sys.stderr = _PipeGuard(saved_err)
    try:
        yield
    finally:
        out.flush()  # what is still buffered breaks here, inside the guard, if the reader has gone
        err.flush()
        sys.stdout, sys.stderr = saved_out, saved_err


def _terminate_like_interrupt():
    """SIGTERM (CI timeouts, pre-commit, editors) unwinds like Ctrl-C, so a write in progress removes its temporary file.

    Returns the handler it replaced (None when it could not install one).
    """

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals to the host
        return None


def _show_rule(key: str) -> int:
    try:
        rule = registry.rule_by_code_or_name(key)
    except registry.UnknownSelector as exc:
        hint = f"did you mean `{exc.suggestion}`? " if exc.suggestion else ""
        print(f"error: unknown rule {key!r}; {hint}`torchlint rules` lists them", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(page(rule))
    return EXIT_CLEAN


def _list_rules() -> int:
    for rule in registry.all_rules().values():
        fix = rule.fix_applicability.value if rule.fix_applicability else "-"
        print(f"{rule.code}  {rule.name:<34} {fix:<9} {rule.message}")
    return EXIT_CLEAN


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _check(args: argparse.Namespace) -> int:
    collection.collect_less()
    paths = args.paths or ["."]
    reads_stdin = paths == ["-"]
    if "-" in paths and not reads_stdin:
        _error("'-' (standard input) cannot be combined with other paths")
        return EXIT_ERROR
    usage = _conflicting_options(args, reads_stdin)
    if usage is not None:
        _error(usage)
        return EXIT_ERROR
    overrides = config.Overrides(
        select=[s for group in args.select for s in group] if args.select is not None else None,
        extend_select=[s for group in args.extend_select for s in group],
        ignore=[s for group in args.ignore for s in group],
        unsafe_fixes=args.unsafe_fixes,
        confidence_level=args.confidence_level,
        target_torch_version=args.target_torch_version,
        fixable=[s for group in args.fixable for s in group] if args.fixable is not None else None,
        unfixable=[s for group in args.unfixable for s in group],
    )
    if args.config is not None and not os.path.isfile(args.config):
        _error(f"configuration file not found: {args.config}")
        return EXIT_ERROR
    try:
        start = [args.stdin_filename] if reads_stdin and args.stdin_filename else ([] if reads_stdin else paths)
        config_path = config.locate(start, args.config)
        cache_dir = None
        if not (reads_stdin or args.no_cache or args.fix or args.diff or args.add_noqa):
            cache_dir = args.cache_dir or default_cache_dir(config_path)
        code = cache.code_fingerprint() if cache_dir else None
        # A warm run never runs a rule: the selection resolves from the cache's snapshot of the rule list.
        with registry.catalog_snapshot(cache.read_catalog(cache_dir, code) if cache_dir else None):
            settings = config.resolve(config_path, overrides)
    except config.ConfigError as exc:
        _error(str(exc))
        return EXIT_ERROR

    if args.show_settings:
        _show_settings(settings)
        return EXIT_CLEAN
    if args.show_files and not reads_stdin:
        files, problems = discover(paths, settings, force_exclude=args.force_exclude)
        for path in files:
            print(path)
        for problem in problems:
            print(f"error: {problem.path}: {problem.message}", file=sys.stderr)
        return EXIT_ERROR if problems else EXIT_CLEAN

    run = runner.RunResults()
    stdin_sources = {}
    if reads_stdin:
        stdin_sources = _check_stdin(args, settings, run)
    else:
        files, problems = discover(paths, settings, force_exclude=args.force_exclude)
        run.diagnostics.extend(problems)
        # One project index per process (built on the first cross-file question; TL403 asks); check runs use the cache.
        jobs = args.jobs if args.jobs is not None else runner.default_jobs()
        # A plain check finds every level and shows those at the floor: the summary says how many more there are.
        counting = not (args.fix or args.diff or args.add_noqa)
        checked = replace(settings, confidence_floor=Confidence.LOW) if counting else settings
        run_cache = Cache(cache_dir, checked, code=code) if cache_dir else None
        for path, outcome in zip(files, runner.run_files(files, paths, args, checked, jobs, run_cache)):
            shown = [f for f in outcome.findings if f.confidence.at_least(settings.confidence_floor)]
            for finding in outcome.findings:
                if not finding.confidence.at_least(settings.confidence_floor):
                    run.below_floor[finding.confidence] = run.below_floor.get(finding.confidence, 0) + 1
            outcome.findings = shown
            run.findings.extend(outcome.findings)
            run.diagnostics.extend(outcome.diagnostics)
            if outcome.fixes:
                run.fixes[path] = outcome.fixes
            if outcome.noqa_directives:
                run.noqa_directives[path] = outcome.noqa_directives
            sys.stdout.write(outcome.output)

    run.findings.sort(key=lambda f: f.sort_key)
    run.diagnostics.sort(key=lambda d: d.sort_key)
    for diagnostic in run.diagnostics:
        print(f"error: {diagnostic.path}:{position(diagnostic.line, diagnostic.column, diagnostic.cell)}: {diagnostic.message}", file=sys.stderr)

    summary = RunSummary(
        run.findings,
        run.diagnostics,
        run.fixes,
        settings.unsafe_fixes,
        fix_mode=args.fix,
        quiet=args.quiet,
        show_fixes=args.show_fixes,
        sources=stdin_sources,
        below_floor=dict(run.below_floor),
        floor=settings.confidence_floor,
    )
    render = (statistics_formatters() if args.statistics else formatters())[args.output_format]
    if args.add_noqa:
        _report_added_noqa(run, args.quiet)
    elif args.diff:
        if args.show_fixes and run.fixes:
            sys.stderr.write(fix_enumeration(run.fixes, "Would fix"))
        if run.fixed:
            print(f"Would fix {run.fixed} {'error' if run.fixed == 1 else 'errors'}.", file=sys.stderr)
    elif not (reads_stdin and args.fix):
        sys.stdout.write(render(summary))
        if args.show_fixes and args.fix and run.fixes and args.output_format not in TEXT_FORMATS:
            sys.stderr.write(fix_enumeration(run.fixes, "Fixed"))  # standard output stays machine-readable
    elif run.findings or (args.show_fixes and run.fixes):
        # Fixed source went to stdout; what remains goes to stderr.
        sys.stderr.write(formatters()["concise"](summary))

    if run.diagnostics:
        return EXIT_ERROR
    if args.diff:
        return EXIT_FINDINGS if run.fixed else EXIT_CLEAN
    if run.findings and not args.exit_zero:
        return EXIT_FINDINGS
    if args.exit_non_zero_on_fix and run.fixed:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _show_settings(settings: config.Settings) -> None:
    """The resolved settings, one per line, in the spelling of ``[tool.torchlint]``."""
    target = settings.target_torch_version
    lines = [
        f"config-file = {settings.config_path or '(none: defaults)'}",
        f"root = {settings.root}",
        f"select = {', '.join(sorted(settings.enabled)) or '(none)'}",
        f"confidence-level = {settings.confidence_floor.value}",
        f"target-torch-version = {f'{target[0]}.{target[1]}' if target else '(the newest known)'}",
        f"unsafe-fixes = {'true' if settings.unsafe_fixes else 'false'}",
        f"unfixable = {', '.join(sorted(settings.unfixable & settings.enabled)) or '(none)'}",
        f"eps = {settings.eps!r}",
        f"exclude = {', '.join(settings.exclude)}",
    ]
    for pattern, codes in settings.per_file_ignores:
        lines.append(f"per-file-ignores {pattern!r} = {', '.join(sorted(codes))}")
    print("\n".join(lines))


def _conflicting_options(args: argparse.Namespace, reads_stdin: bool) -> Optional[str]:
    """Why the options cannot go together, or None."""
    if args.add_noqa and (args.fix or args.diff):
        return "--add-noqa cannot be combined with --fix or --diff"
    if args.add_noqa and reads_stdin:
        return "--add-noqa writes the files it checks; it cannot read standard input"
    if args.statistics and args.output_format not in statistics_formatters():
        return f"--statistics prints {', '.join(sorted(statistics_formatters()))}, not {args.output_format}"
    return None


def _report_added_noqa(run: runner.RunResults, quiet: bool) -> None:
    """How many ``# noqa`` comments went into how many files, and each finding no comment could silence."""
    for finding in run.findings:
        where = position(finding.location.line, finding.location.column, finding.cell)
        print(f"warning: {finding.path}:{where}: {finding.code} not silenced: no place for a '# noqa' comment that would be read there", file=sys.stderr)
    if not quiet:
        directives, files = sum(run.noqa_directives.values()), len(run.noqa_directives)
        print(f"Added {directives} noqa {'directive' if directives == 1 else 'directives'} to {files} {'file' if files == 1 else 'files'}.")


def _check_stdin(args: argparse.Namespace, settings: config.Settings, run: runner.RunResults) -> Dict[str, str]:
    """Check (or fix) standard input; the text its findings are located in, by its name (for the full format)."""
    path = args.stdin_filename or "-"
    data = sys.stdin.buffer.read()
    try:
        decoded = source.decode(data)
    except source.SourceError as exc:
        run.diagnostics.append(Diagnostic(path, exc.message, exc.line, exc.column, exc.kind))
        if args.fix:
            sys.stdout.buffer.write(data)
        return {}
    new_text = runner.process_text(decoded.text, path, args, settings, run)
    if args.fix and not args.diff:
        sys.stdout.buffer.write(decoded.encode(new_text) if new_text is not None else data)
    return {path: new_text if new_text is not None else decoded.text}
