"""What runs confirmed: findings that ``torchlint trace`` (or ``torchlint.watch``) saw happen, kept beside the cache.

A confirmation names a finding by its file (relative to the project's root), its code and a digest of the
text of the lines it spans, with the run's evidence and the date.  ``torchlint check``, the flake8 plugin
and ``torchlint server`` read them with the configuration (``config.resolve``) and report a finding they
match at ``high``, whatever its static level, its message ending with the evidence, until the text at that
site changes (an edited line no longer matches; lines moved by edits elsewhere still do).

The store is ``confirmed.json`` in ``.torchlint_cache`` next to the configuration file (else in the folder
the run started in); deleting it forgets every confirmation.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from torchlint.findings import Confidence, Finding

STORE_NAME = "confirmed.json"
FORMAT = 1
MESSAGE_MARK = "confirmed by torchlint trace: "


class Confirmation(NamedTuple):
    path: str  # relative to the project's root, with / between folders
    code: str
    digest: str  # of the flagged lines' text (site_digest)
    evidence: str
    date: str  # ISO date of the run


def store_path(cache_dir: str) -> str:
    return os.path.join(cache_dir, STORE_NAME)


def relative(path: str, root: str) -> str:
    return os.path.relpath(os.path.abspath(path), os.path.abspath(root)).replace(os.sep, "/")


def site_digest(text: str, line: int, end_line: int) -> str:
    """A digest of the text of lines ``line`` to ``end_line`` (1-based), each without its indentation."""
    lines = text.splitlines()[line - 1 : end_line]
    joined = "\n".join(part.strip() for part in lines)
    return hashlib.sha1(joined.encode("utf-8")).hexdigest()[:16]


def load(cache_dir: str) -> Tuple[Confirmation, ...]:
    """The confirmations kept in ``cache_dir`` (none when the store is missing or unreadable)."""
    try:
        with open(store_path(cache_dir), encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("format") != FORMAT:
            return ()
        return tuple(Confirmation(**item) for item in data.get("confirmed", []))
    except (OSError, ValueError, TypeError, AttributeError):
        return ()


def record(cache_dir: str, confirmations: Iterable[Confirmation]) -> None:
    """Add ``confirmations`` to the store (a newer one replaces the one of the same site), atomically."""
    new = list(confirmations)
    if not new:
        return
    os.makedirs(cache_dir, exist_ok=True)
    with _locked(cache_dir):  # the ranks of one launch record at the same moment: none may lose another's
        kept: Dict[Tuple[str, str, str], Confirmation] = {(c.path, c.code, c.digest): c for c in load(cache_dir)}
        kept.update(((c.path, c.code, c.digest), c) for c in new)
        document = {"format": FORMAT, "confirmed": [c._asdict() for c in sorted(kept.values())]}
        handle, temporary = tempfile.mkstemp(dir=cache_dir, prefix=".confirmed-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(document, out, indent=1)
            os.replace(temporary, store_path(cache_dir))
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


@contextlib.contextmanager
def _locked(cache_dir: str) -> Iterator[None]:
    """An exclusive lock on the store while it is read and rewritten (where the platform has ``fcntl``)."""
    try:
        import fcntl
    except ImportError:  # Windows: one writer at a time is the common case
        yield
        return
    with open(os.path.join(cache_dir, ".confirmed.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def for_file(confirmations: Sequence[Confirmation], path: str, root: str) -> List[Confirmation]:
    if not confirmations:
        return []
    name = relative(path, root)
    return [c for c in confirmations if c.path == name]


def promote(findings: Sequence[Finding], text: str, confirmations: Sequence[Confirmation]) -> List[Finding]:
    """``findings`` with those a run confirmed at ``high``, their message ending with the run's evidence."""
    if not confirmations:
        return list(findings)
    by_site = {(c.code, c.digest): c for c in confirmations}
    promoted = []
    for finding in findings:
        found: Optional[Confirmation] = by_site.get((finding.code, site_digest(text, finding.location.line, finding.location.end_line)))
        if found is not None:
            message = f"{finding.message} ({MESSAGE_MARK}{found.evidence}, {found.date})"
            finding = dataclasses.replace(finding, confidence=Confidence.HIGH, message=message)
        promoted.append(finding)
    return promoted
