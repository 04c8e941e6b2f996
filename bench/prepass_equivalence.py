"""Check that the ``ast`` pre-pass changes no finding, and measure what it saves, on real code.

    python bench/prepass_equivalence.py [--corpus DIR] [--packages a,b | --full] [--limit N] [PATH ...]

Every file is linted twice in this process with every rule enabled: with the
pre-pass (the default) and without it (every triggered rule on the whole
parsed file).  Findings are compared with their codes, positions, messages
and fix edits; any difference is printed and the exit status is 1.  CPU time
of each way is summed per file, plus the share of lines the pre-pass handed
to LibCST.  The corpus comes from ``bench/corpus.py`` (outside the repository).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from torchlint import config, engine, prepass, registry  # noqa: E402
from torchlint.source import SourceError, read  # noqa: E402

DEFAULT_CORPUS = os.environ.get("TORCHLINT_CORPUS", "/work/corpus")


def _files(paths: List[str]) -> List[str]:
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
            continue
        for directory, subdirs, names in os.walk(path):
            subdirs.sort()
            found.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return found


def _signature(result: engine.LintResult) -> List[Tuple]:
    return [
        (f.code, f.location, f.message, f.fix.edits if f.fix else None) for f in result.findings
    ] + [(d.kind, d.line, d.column, d.message) for d in result.diagnostics]


def _parsed_lines(source: str, path: str, settings: config.Settings) -> int:
    """Lines of the text the pre-pass hands to LibCST (blanked lines not counted), 0 when nothing is parsed."""
    rules = engine.select_rules(source, settings.codes_for(path))
    if not rules:
        return 0
    plan = prepass.plan(source, path, rules)
    if plan is None:
        return source.count("\n") + 1
    if not plan.rules:
        return 0
    return sum(1 for line in plan.text.splitlines() if line.strip())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--packages", default="peft,accelerate")
    parser.add_argument("--full", action="store_true", help="every package under --corpus")
    parser.add_argument("--limit", type=int, default=0, help="check only the first N files")
    args = parser.parse_args(argv)
    if args.paths:
        roots = args.paths
    elif args.full:
        roots = [os.path.join(args.corpus, p) for p in sorted(os.listdir(args.corpus))]
    else:
        roots = [os.path.join(args.corpus, p) for p in args.packages.split(",")]
    files = _files(roots)
    if args.limit:
        files = files[: args.limit]
    settings = config.Settings(enabled=frozenset(registry.all_rules()))
    with_time = without_time = 0.0
    lines = parsed = 0
    differences = 0
    for path in files:
        try:
            source = read(path).text
        except (SourceError, OSError):
            continue
        lines += source.count("\n") + 1
        started = time.process_time()
        fast = engine.lint_text(source, path, settings)
        with_time += time.process_time() - started
        started = time.process_time()
        slow = engine.lint_text(source, path, settings, use_prepass=False)
        without_time += time.process_time() - started
        parsed += _parsed_lines(source, path, settings)
        if _signature(fast) != _signature(slow):
            differences += 1
            print(f"DIFFERENT: {path}")
            for item in sorted(set(_signature(slow)) - set(_signature(fast)), key=repr):
                print(f"  only without the pre-pass: {item[:3]}")
            for item in sorted(set(_signature(fast)) - set(_signature(slow)), key=repr):
                print(f"  only with the pre-pass:    {item[:3]}")
    print(
        f"{len(files)} files, {lines} lines; LibCST saw {parsed} non-blank lines ({parsed / max(lines, 1):.1%}); "
        f"CPU s with the pre-pass {with_time:.2f}, without {without_time:.2f} "
        f"({without_time / max(with_time, 1e-9):.1f}x); files whose findings differ: {differences}"
    )
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
