"""Reading and writing source files without losing a byte the user did not ask to change.

The text handed to rules is the decoded file exactly as it is (no newline
translation, no BOM); writing encodes it back with the file's own encoding
and BOM, through a temporary file and an atomic rename.
"""
from __future__ import annotations

import ast
import io
import os
import re
import tempfile
import tokenize
from dataclasses import dataclass
from itertools import accumulate
from typing import Optional, Tuple

# The file suffix of a Jupyter notebook (torchlint/notebook.py reads them).
NOTEBOOK_SUFFIX = ".ipynb"


class SourceError(Exception):
    """A file that cannot be read or decoded; carries the line where it went wrong."""

    def __init__(self, message: str, line: int = 1, column: int = 1, kind: str = "decode") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.kind = kind


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str  # the codec used to decode; "utf-8-sig" when the file had a BOM

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def decode(data: bytes) -> SourceText:
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise SourceError("source contains a NUL byte", line=line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "encoding problem" in str(exc):
            raise SourceError("the file starts with a UTF-8 byte order mark but declares another encoding") from None
        if "invalid or missing encoding declaration" not in str(exc):
            # an unknown codec in a coding cookie
            raise SourceError(f"cannot determine encoding: {exc}", line=getattr(exc, "lineno", None) or 1) from None
        # The first lines are not UTF-8 and declare nothing (a binary file, say): point at the byte.
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SourceError(
            f"cannot decode byte 0x{data[exc.start]:02x} as {encoding}", line=line, column=column
        ) from None
    return SourceText(text, encoding)


def read(path: str) -> SourceText:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SourceError(f"cannot read file: {exc.strerror or exc}", kind="io") from None
    return decode(data)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` by ``data`` so that a crash leaves either the old or the new file."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".torchlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def split_lines(text: str) -> list:
    """The lines of ``text`` with their endings, numbered as Python's tokenizer numbers them."""
    starts = line_starts(text)
    ends = starts[1:] + [len(text)]
    lines = [text[a:b] for a, b in zip(starts, ends)]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_NEWLINE = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list:
    """Offsets at which each line begins, splitting on \\n, \\r\\n and \\r as Python's tokenizer does."""
    return [0] + [m.end() for m in _NEWLINE.finditer(text)]


# CPython's tokenizer refuses more than 200 open brackets ("too many nested
# parentheses"); LibCST's native parser has no such limit and overflows the C
# stack (a segfault that kills the whole run) a few thousand levels deep.
MAX_BRACKET_DEPTH = 200
_NOT_BRACKET = re.compile(r"[^()\[\]{}]+")
_DEPTH_STEP = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


# Long runs of prefix operators (``- - - x``, ``not not x``, ``lambda: lambda: x``, ``a ** a ** a``)
# nest without brackets; LibCST's parser overflows on tens of thousands of them.
_PREFIX_RUN = re.compile(r"(?:(?:[-+~]|\bnot\b|\bawait\b|\blambda\b[^:\n]*:|\*\*\s*[\w.]+)[ \t]*){1000,}")


def too_deeply_nested(text: str) -> Optional[Tuple[int, int, str]]:
    """(line, column, reason) where the code nests deeper than Python allows, or None.

    A cheap count over every bracket character comes first; only when it
    exceeds the limit (brackets inside strings and comments count there) are
    the tokens looked at, so ordinary files pay a regex and a sum.  A run of
    a thousand prefix operators is reported when CPython cannot compile it
    either (so a long line of dashes in a comment is not).
    """
    run = _PREFIX_RUN.search(text)
    if run is not None:
        try:
            compile(text, "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, RecursionError, MemoryError):
            line = text.count("\n", 0, run.start()) + 1
            return line, run.start() - (text.rfind("\n", 0, run.start()) + 1) + 1, "expression nested too deeply"
    brackets = _NOT_BRACKET.sub("", text)
    if not brackets or max(accumulate(map(_DEPTH_STEP.__getitem__, brackets))) <= MAX_BRACKET_DEPTH:
        return None
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in _DEPTH_STEP:
                depth += _DEPTH_STEP[token.string]
                if depth > MAX_BRACKET_DEPTH:
                    return token.start[0], token.start[1] + 1, "too many nested parentheses"
    except (tokenize.TokenError, SyntaxError):
        # The tokens stop making sense before the brackets got that deep; the
        # parser will report the real error.
        return None
    return None


def python_syntax_error(text: str) -> Optional[Tuple[int, int, str]]:
    """CPython's own account of the first syntax error: (line, column, message), or None.

    LibCST points at the token after the mistake (often the next line) and
    lists the tokens it expected; CPython names the mistake where it is
    ("'(' was never closed", "expected ':'"). Only called once LibCST has
    failed, so it costs nothing on files that parse.
    """
    try:
        compile(text, "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno or 1, exc.offset or 1, exc.msg
    except (RecursionError, MemoryError, ValueError):
        return None
    return None


# ``async`` as a keyword argument (``x.cuda(async=True)``, torch 0.3 and before) has been a syntax error since
# Python 3.7 made ``async`` a reserved word: the whole file no longer parses. Such a file is read with the word
# replaced by a name of the same length, so that every line and column stays where it is; TL601 reports each
# one (with the rename to ``non_blocking``), and no other fix may write the stand-in into the file.
LEGACY_ASYNC_STAND_IN = "_asyn"
_LEGACY_ASYNC_KEYWORD = re.compile(r"(?<=[(,])(\s*)async(?=\s*=(?!=))")


def readable_legacy_text(text: str) -> Optional[str]:
    """``text`` with its ``async=`` keyword arguments renamed to :data:`LEGACY_ASYNC_STAND_IN`, when the text
    does not parse and the renamed one does; None otherwise (modern code, or another syntax error)."""
    if "async" not in text or LEGACY_ASYNC_STAND_IN in text or not _LEGACY_ASYNC_KEYWORD.search(text):
        return None
    renamed = _LEGACY_ASYNC_KEYWORD.sub(lambda match: match.group(1) + LEGACY_ASYNC_STAND_IN, text)
    try:
        ast.parse(text)
    except SyntaxError:
        pass
    except (ValueError, RecursionError, MemoryError):
        return None
    else:
        return None
    try:
        ast.parse(renamed)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return renamed
