"""The verdict files the precision benchmarks share: tab-separated rows under a fixed header, read strictly."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator, Sequence, Tuple


def verdict_rows(path: Path, columns: Sequence[str]) -> Iterator[Tuple[int, list]]:
    """(line number, fields) of each row of ``path`` (nothing when it is absent or empty); a header other than
    ``columns`` or a row with another number of fields stops the run with its line number: a typo must not
    count as a verdict."""
    if not path.exists():
        return
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        header = next(rows, None)
        if header is None:
            return
        if tuple(header) != tuple(columns):
            raise SystemExit(f"{path}: the header must be {' '.join(columns)}")
        for number, row in enumerate(rows, start=2):
            if len(row) != len(columns):
                raise SystemExit(f"{path}:{number}: expected {len(columns)} tab-separated fields")
            yield number, row
