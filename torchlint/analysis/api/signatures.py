"""Which keyword arguments a torch API accepts, from a table shipped with the package.

The table (``torchlint/data/torch_signatures.json``) is generated from an
installed torch by ``tools/gen_signatures.py``; the linter reads it and never
imports torch.  It covers the most used torch / torch.nn / torch.nn.functional /
torch.utils.data / torch.optim APIs; an API that is not in it, or that takes
``**kwargs``, is unknown: every keyword is accepted.
"""
from __future__ import annotations

import difflib
import json
from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, Optional, Tuple

import libcst as cst

# How similar a misspelt keyword must be to a real one to be renamed (difflib's ratio).
CLOSE_MATCH_CUTOFF = 0.8


@lru_cache(maxsize=1)
def _table() -> Tuple[str, Dict[str, FrozenSet[str]], Dict[str, str], Dict[str, Dict[str, str]]]:
    from importlib import resources

    text = resources.files("torchlint").joinpath("data/torch_signatures.json").read_text(encoding="utf-8")
    data = json.loads(text)
    apis = {name: frozenset(keywords) for name, keywords in data["apis"].items()}
    return data["torch_version"], apis, dict(data.get("aliases", {})), dict(data.get("renamed", {}))


def table_torch_version() -> str:
    """The torch version the table was generated from (e.g. ``2.13.0``)."""
    return _table()[0]


def public_name(qualified: str) -> str:
    """``torch.nn.Linear`` for ``torch.nn.modules.linear.Linear``; the name itself otherwise."""
    return _table()[2].get(qualified, qualified)


def accepted_keywords(qualified: Optional[str]) -> Optional[FrozenSet[str]]:
    """The keywords API ``qualified`` accepts, or None when the table does not know it (anything goes)."""
    if qualified is None:
        return None
    _, apis, aliases, _ = _table()
    found = apis.get(aliases.get(qualified, qualified))
    if found is None and qualified.startswith(("torchvision.", "torchtext.")):
        return _package_keywords(qualified)[0]
    return found


@lru_cache(maxsize=None)
def _package_keywords(qualified: str) -> Tuple[Optional[FrozenSet[str]], Dict[str, str]]:
    """What the newest torchvision (torchtext) release of API ``qualified`` takes (None: unknown, or ``**kwargs``), and its
    renamed keywords: those whose deprecation named a keyword it takes now (``resample`` -> ``interpolation``)."""
    from torchlint.analysis.api import api_table

    entry = api_table.api_entry(qualified)
    if entry is None:
        return None, {}
    newest = entry.last
    taken = frozenset(k for k, (first, last) in entry.keywords.items() if first <= newest <= last)
    if api_table.ANY_KEYWORD in taken:
        return None, {}
    renamed = {
        keyword: note.replacement
        for keyword, note in entry.deprecated_keywords.items()
        if note.replacement in taken and keyword not in taken
    }
    return taken, renamed


def tensor_method(name: str) -> str:
    """The table's name of a method of ``torch.Tensor`` (``torch.Tensor.backward``)."""
    return f"torch.Tensor.{name}"


def renamed_keyword(qualified: Optional[str], written: str) -> Optional[str]:
    """The keyword torch renamed ``written`` to for API ``qualified`` (``retain_variables`` -> ``retain_graph``)."""
    if qualified is None:
        return None
    _, _, aliases, renamed = _table()
    found = renamed.get(aliases.get(qualified, qualified), {}).get(written)
    if found is None and qualified.startswith(("torchvision.", "torchtext.")):
        return _package_keywords(qualified)[1].get(written)
    return found


def closest_keyword(written: str, accepted: Iterable[str]) -> Optional[str]:
    """The one accepted name closest to ``written``, or None when none is close or two tie."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, written, name).ratio(), name) for name in accepted),
        reverse=True,
    )
    if not scored or scored[0][0] < CLOSE_MATCH_CUTOFF:
        return None
    if len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1]


def misspelt_keywords(qualified: Optional[str], call: cst.Call) -> Dict[str, Optional[str]]:
    """Keyword arguments of ``call`` that API ``qualified`` does not accept -> their unambiguous correction."""
    accepted = accepted_keywords(qualified)
    if accepted is None:
        return {}
    found: Dict[str, Optional[str]] = {}
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value not in accepted:
            written = arg.keyword.value
            found[written] = renamed_keyword(qualified, written) or closest_keyword(written, accepted)
    return found


def gives_keyword(qualified: Optional[str], call: cst.Call, name: str) -> bool:
    """Whether ``call`` passes ``name=``, literally or misspelt so that the correction is ``name``.

    Rules that add a keyword ask this, so that their fix and the misspelling's
    rename (TL405) never produce the same keyword twice.
    """
    if any(arg.keyword is not None and arg.keyword.value == name for arg in call.args):
        return True
    return name in misspelt_keywords(qualified, call).values()
