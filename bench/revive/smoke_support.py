"""What every revive smoke script shares: stand-ins for optional packages a repository imports but the
smoke run never uses (a dashboard, a logger), and the line the runner reads as success.

A stand-in only replaces a package that is missing, so a smoke run never hides the real one; a stand-in
answers any attribute with a callable that does nothing.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

SUCCESS = "REVIVE-SMOKE-OK"


class _Anything(types.ModuleType):
    """A module whose every attribute, item and call result is another such stand-in."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self.__name__}.{name}")

    def __call__(self, *args, **kwargs):
        return _Anything(self.__name__ + "()")

    def __getitem__(self, key):
        return _Anything(f"{self.__name__}[]")

    def __setitem__(self, key, value) -> None:
        pass

    def __iter__(self):
        return iter(())


def stand_in(*names: str) -> None:
    """Install a stand-in for each package of ``names`` that is not installed (``visdom``, ``tensorboardX``)."""
    for name in names:
        root = name.split(".")[0]
        if root in sys.modules or importlib.util.find_spec(root) is not None:
            continue
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            dotted = ".".join(parts[:depth])
            if dotted not in sys.modules:
                module = _Anything(dotted)
                module.__path__ = []  # a package: submodules can be imported from it
                module.__spec__ = importlib.machinery.ModuleSpec(dotted, None, is_package=True)
                sys.modules[dotted] = module


def succeeded(loss) -> None:
    """Print the success line with the step's loss (a finite number is what a working step gives)."""
    value = float(loss.detach()) if hasattr(loss, "detach") else float(loss)
    print(f"{SUCCESS} loss={value:.6g}", flush=True)
