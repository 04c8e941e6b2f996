"""The per-file cost of a notebook against the same code as a .py file, as a ratio, in one run.

    python bench/notebook_speed.py [--corpus DIR] [--packages a,b] [--rounds N] [--limit N]

Each .py file of the chosen packages becomes a notebook the way such code sits in one: a cell per
top-level statement group (the imports together, each ``def``/``class`` alone, runs of simple
statements together, the comments above a statement with it), a markdown cell every third cell,
and a short stream output on every other code cell; the JSON is written as Jupyter writes it
(indent 1, sorted keys, non-ASCII as itself).  The .py file and the notebook are then checked by
``runner.check_path`` (what the CLI does per file: read, decode, lint, no cache) in this process,
alternately, ``--rounds`` times; the best round of each file counts.  Printed: the files, lines
and cells, the seconds for the .py files and for the notebooks, their ratio (the aim is <= 1.2),
and whether every notebook reported what its .py file reported (same codes, messages and lines,
once the lines are counted within cells).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import time
from typing import List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

DEFAULT_CORPUS = os.path.expanduser(os.environ.get("TORCHLINT_CORPUS", "~/.cache/torchlint-corpus"))
DEFAULT_PACKAGES = ["peft", "accelerate"]


def cell_ranges(source: str) -> Optional[List[Tuple[int, int]]]:
    """(first, last) 0-based line ranges of the cells ``source`` splits into, or None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    lines = source.splitlines()
    starts: List[int] = []
    previous_kind = None
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]) - 1
        kind = "import" if isinstance(node, (ast.Import, ast.ImportFrom)) else (
            "block" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else "simple")
        if kind == "block" or kind != previous_kind or not starts:
            starts.append(first)
        previous_kind = kind
    if not starts:
        return None
    # The comments and blank lines above a statement go with it; the file's first cell starts at line 0.
    starts = [0] + starts[1:]
    for index in range(1, len(starts)):
        line = starts[index]
        while line - 1 > starts[index - 1] and (not lines[line - 1].strip() or lines[line - 1].lstrip().startswith("#")):
            line -= 1
        starts[index] = line
    return [(start, end) for start, end in zip(starts, starts[1:] + [len(lines)])]


def to_notebook(source: str, ranges: List[Tuple[int, int]]) -> str:
    lines = source.splitlines(keepends=True)
    cells = []
    for number, (start, end) in enumerate(ranges):
        if number % 3 == 2:
            cells.append({"cell_type": "markdown", "id": f"m{number}", "metadata": {}, "source": [f"## Étape {number}\n", "Notes."]})
        text = "".join(lines[start:end]).rstrip("\n")
        outputs = [{"name": "stdout", "output_type": "stream", "text": [f"cellule {number} ✓\n"]}] if number % 2 else []
        cells.append(
            {"cell_type": "code", "execution_count": number + 1, "id": f"c{number}", "metadata": {}, "outputs": outputs,
             "source": text.splitlines(keepends=True)}
        )
    document = {
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--packages", default=",".join(DEFAULT_PACKAGES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="at most this many files (0: all)")
    options = parser.parse_args(argv)

    from torchlint import collection, config, registry, runner

    collection.collect_less()
    registry.all_rules()  # imported before timing, as a CLI worker has them
    settings = config.resolve(None, config.Overrides())
    check_args = argparse.Namespace(fix=False, diff=False, add_noqa=False)

    sources = []
    for package in options.packages.split(","):
        root = os.path.join(options.corpus, package)
        for directory, subdirs, names in os.walk(root):
            subdirs.sort()
            sources.extend(os.path.join(directory, name) for name in sorted(names) if name.endswith(".py"))
    if options.limit:
        sources = sources[: options.limit]

    with tempfile.TemporaryDirectory(prefix="torchlint-notebook-bench-") as scratch:
        pairs = []
        lines = cells = 0
        for number, path in enumerate(sources):
            with open(path, encoding="utf-8", errors="replace") as handle:
                source = handle.read()
            ranges = cell_ranges(source)
            if ranges is None:
                continue
            python_path = os.path.join(scratch, f"f{number}.py")
            notebook_path = os.path.join(scratch, f"f{number}.ipynb")
            with open(python_path, "w", encoding="utf-8") as handle:
                handle.write(source)
            with open(notebook_path, "w", encoding="utf-8") as handle:
                handle.write(to_notebook(source, ranges))
            pairs.append((python_path, notebook_path, ranges))
            lines += source.count("\n") + 1
            cells += len(ranges)

        best = {path: float("inf") for pair in pairs for path in pair[:2]}
        outcomes = {}
        for round_number in range(options.rounds):
            for index, (python_path, notebook_path, _) in enumerate(pairs):
                # Alternate which goes first, so that neither always runs on a warm cache line.
                order = (python_path, notebook_path) if (index + round_number) % 2 == 0 else (notebook_path, python_path)
                for path in order:
                    start = time.perf_counter()
                    outcomes[path] = runner.check_path(path, check_args, settings)
                    best[path] = min(best[path], time.perf_counter() - start)

        python_seconds = sum(best[p] for p, _, _ in pairs)
        notebook_seconds = sum(best[n] for _, n, _ in pairs)
        differing = [python_path for python_path, notebook_path, ranges in pairs
                     if _report(outcomes[python_path], ranges, False) != _report(outcomes[notebook_path], ranges, True)]
    print(f"{len(pairs)} files ({len(sources) - len(pairs)} that ast cannot parse left out), {lines} lines, {cells} code cells; "
          f"best of {options.rounds} rounds, one process")
    print(f".py files:  {python_seconds:8.2f} s")
    print(f"notebooks:  {notebook_seconds:8.2f} s")
    print(f"ratio notebook / .py: {notebook_seconds / python_seconds:.3f}")
    print(f"notebooks reporting other findings than their .py file: {len(differing)}")
    for path in differing[:10]:
        print(f"  {path}")
    return 0


def _report(outcome, ranges: List[Tuple[int, int]], in_cells: bool) -> List[Tuple[str, str, int, int]]:
    """(code, message, file line, column) of each finding; a notebook's cell lines read back as file lines."""
    code_cells = []  # the notebook's cell number of each range: markdown cells sit before every third code cell
    number = 0
    for index in range(len(ranges)):
        number += 1 + (index % 3 == 2)
        code_cells.append(number)
    found = []
    for finding in outcome.findings:
        line = finding.location.line
        if in_cells:
            line += ranges[code_cells.index(finding.cell.index)][0]
        found.append((finding.code, finding.message, line, finding.location.column))
    return sorted(found)


if __name__ == "__main__":
    sys.exit(main())
