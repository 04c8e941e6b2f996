"""Regenerate the rules table in README.md from the rule registry.

    python tools/update_readme.py          # rewrite README.md in place
    python tools/update_readme.py --check  # exit 1 when README.md is stale
"""
from __future__ import annotations

import sys
from pathlib import Path

from torchlint.docs import rules_table

README = Path(__file__).resolve().parent.parent / "README.md"
START = "<!-- rules-table:start -->\n"
END = "<!-- rules-table:end -->\n"


def render(text: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    if not rest or not tail and END not in rest:
        raise SystemExit(f"{README}: rules-table markers missing")
    return head + START + rules_table() + END + tail


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    current = README.read_text(encoding="utf-8")
    wanted = render(current)
    if "--check" in argv:
        if current != wanted:
            print("README.md rules table is stale: run python tools/update_readme.py", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
