"""What the project index costs on a large tree, against indexing every dataset class eagerly.

    python bench/project_index.py [--corpus DIR]

DIR is the body of real PyTorch code made by `bench/corpus.py` (default: its
default destination, or $TORCHLINT_CORPUS). The index (torchlint/analysis/
project_index.py) maps every file to its module name up front and parses a module
only when a lookup reaches it; the eager alternative parses every file that
contains `__getitem__`. Printed: file counts, seconds for each, and the
number of modules each parses. Ratios in one run on one machine, not a test.
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import default_dest  # noqa: E402
from torchlint import config, engine  # noqa: E402
from torchlint.analysis.model import project_index  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("TORCHLINT_CORPUS", default_dest())))
    args = parser.parse_args(argv)
    files = sorted(glob.glob(str(args.corpus / "**" / "*.py"), recursive=True))
    if not files:
        print(f"no Python files under {args.corpus}: run bench/corpus.py first", file=sys.stderr)
        return 2

    # Lazy index: module map, then the lookups a run with DataLoaders would make.
    start = time.perf_counter()
    index = project_index.ProjectIndex(files)
    index.module_of(files[0])
    mapped = time.perf_counter() - start
    # What TL403 asks in a real run: the files with a DataLoader are linted with the index active;
    # the time spent inside the index (reading and parsing modules) is measured apart from LibCST's.
    inside = [0.0]
    original = index._module_facts

    def timed(module):
        began = time.perf_counter()
        try:
            return original(module)
        finally:
            inside[0] += time.perf_counter() - began

    index._module_facts = timed
    settings = config.Settings(enabled=frozenset({"TL403"}))
    loaders = findings = 0
    start = time.perf_counter()
    with project_index.activated(index):
        for path in files:
            with open(path, "rb") as handle:
                data = handle.read()
            if b"DataLoader(" not in data:
                continue
            loaders += 1
            findings += len(engine.lint_text(data.decode("utf-8", "replace"), path, settings).findings)
    linted = time.perf_counter() - start

    # Eager alternative: parse every file that could define a dataset.
    start = time.perf_counter()
    eager = 0
    for path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        if b"__getitem__" in data:
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                continue
            eager += 1
    eager_time = time.perf_counter() - start

    print(f"files: {len(files)}")
    print(f"lazy index: module map {mapped:.2f} s; {loaders} files with DataLoader( linted with TL403 in {linted:.1f} s "
          f"({findings} findings), of which inside the index {inside[0]:.2f} s; modules parsed by the index {index.parsed_files}")
    print(f"eager: parse every file containing __getitem__ ({eager} files) {eager_time:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
