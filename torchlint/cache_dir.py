"""Where the cache lives by default (a leaf: the cache, the configuration and the confirmations read it)."""
from __future__ import annotations

import os
from typing import Optional

DEFAULT_DIR_NAME = ".torchlint_cache"


def default_dir(config_path: Optional[str], cwd: Optional[str] = None) -> str:
    """``.torchlint_cache`` next to the configuration file, else in ``cwd`` (the current directory)."""
    base = os.path.dirname(os.path.abspath(config_path)) if config_path else (cwd or os.getcwd())
    return os.path.join(base, DEFAULT_DIR_NAME)
