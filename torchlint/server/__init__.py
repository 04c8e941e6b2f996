"""``torchlint server``: the language server, for editors (``pip install "torchlint[server]"``).

Nothing here imports pygls until the server starts: the check path never needs it.
"""
from __future__ import annotations

import sys


def main() -> int:
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError as exc:
        print(
            f"error: `torchlint server` needs the server extra ({exc.name} is missing): pip install \"torchlint[server]\" "
            "(from a clone of torchlint: pip install \".[server]\")",
            file=sys.stderr,
        )
        return 2
    from torchlint.server.language_server import serve

    return serve()
