"""torchlint: a static analyzer for PyTorch code, with autofixes."""

from torchlint.version import __version__  # noqa: F401  (the package's public version)


def watch(output_file=None, stop_on_first=False):
    """Watch a block of this program as ``torchlint trace`` watches a run: a context manager and a decorator.

    ``with torchlint.watch() as seen: train()`` checks the sites of the project's numerics and fused-op
    findings in the modules the block imports, and names the first Inf/NaN born in it with its line.  When
    the block ends the report is printed to standard error (and written as ``trace``'s JSON to
    ``output_file``); ``seen.findings`` and ``seen.first_nonfinite`` hold it.  ``stop_on_first=True`` raises
    :class:`NonFiniteValueError`, naming the line, at the first non-finite value.  torch is imported when the
    watch starts, not by ``import torchlint``.
    """
    from torchlint.trace import inprocess

    return inprocess.watch(output_file, stop_on_first)


def __getattr__(name):
    if name == "NonFiniteValueError":
        from torchlint.trace.inprocess import NonFiniteValueError

        return NonFiniteValueError
    raise AttributeError(f"module 'torchlint' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext torchlint``: the ``%%torchlint_trace`` cell magic and ``%torchlint_trace on|off``."""
    from torchlint.trace import magics

    magics.load(ipython)
