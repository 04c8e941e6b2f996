"""Garbage collection while checking files.

A LibCST parse allocates millions of objects that live for one file.  With
CPython's default threshold (a collection of the youngest generation every
700 allocations) those collections cost ~18% of a cold run (measured on
peft+accelerate, bench/results/speed.md); every 100,000 allocations they are
noise, and the memory a file's trees take is freed when the file is done.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator

# Allocations between two collections of the youngest generation.
GC_THRESHOLD = 100_000


def collect_less() -> None:
    """For a process that only checks files (the CLI; its forked workers inherit it)."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


@contextlib.contextmanager
def collecting_less() -> Iterator[None]:
    """GC_THRESHOLD while checking, the caller's setting afterwards (the flake8 plugin runs in flake8's process)."""
    before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
