"""Loading a bench/ script as a module in a test."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterator

BENCH = Path(__file__).resolve().parent.parent / "bench"


@contextlib.contextmanager
def bench_module(filename: str, name: str) -> Iterator[object]:
    """``bench/<filename>`` imported as ``name`` for the block (registered while it runs: dataclasses look their
    module up while being defined)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]
