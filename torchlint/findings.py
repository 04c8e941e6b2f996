"""The types every layer shares: a finding, its fix and confidence, a diagnostic of the run.

They sit below the analysis, the rules and the engine, so that any of them can build or read a
finding without importing the others.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst


# The seeds of a rule that may report, and look, anywhere in the file (see torchlint/prepass.py).
WHOLE_FILE = "whole-file"


class Confidence(str, enum.Enum):
    """How sure a finding is that the hazard can happen at run time (see ``torchlint rule CODE``).

    ``high``: the value reaches the edge by its own construction (a norm, a mask count, a
    probability under a log); ``medium``: nothing says it cannot, in code that gradients flow
    through; ``low``: nothing says it cannot, elsewhere.  The run shows findings at or above
    the configured floor (``--confidence-level``, default ``high``).
    """

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return _CONFIDENCE_RANK[self]

    def at_least(self, floor: "Confidence") -> bool:
        return self.rank >= floor.rank


_CONFIDENCE_RANK = {Confidence.LOW: 0, Confidence.MEDIUM: 1, Confidence.HIGH: 2}


DEFAULT_CONFIDENCE_FLOOR = Confidence.HIGH


class Applicability(str, enum.Enum):
    """How much a fix may change behaviour; decides which flag applies it."""

    SAFE = "safe"  # same values on ordinary inputs: applied by --fix
    NUMERICS = "numerics"  # changes values only at the domain edge: applied by --fix
    UNSAFE = "unsafe"  # can change behaviour: needs --unsafe-fixes

    def applied_by(self, unsafe_fixes: bool) -> bool:
        return self is not Applicability.UNSAFE or unsafe_fixes


@dataclass(frozen=True)
class ImportRequirement:
    """An import a fix needs, e.g. ``import torch.nn.functional as F``."""

    module: str
    alias: Optional[str] = None

    def statement(self) -> str:
        if self.alias and self.alias != self.module:
            return f"import {self.module} as {self.alias}"
        return f"import {self.module}"


@dataclass(frozen=True)
class Replacement:
    """Replace ``old`` (a node of the parsed file) by ``new`` (a node or source text).

    ``new=cst.RemoveFromParent()`` deletes ``old``, a simple statement line
    alone on its line(s), together with its trailing comment and newline.
    """

    old: cst.CSTNode
    new: Union[cst.CSTNode, str]


@dataclass(frozen=True)
class FixSpec:
    """What a rule proposes; the engine turns it into text edits."""

    applicability: Applicability
    message: str
    replacements: Tuple[Replacement, ...]
    imports: Tuple[ImportRequirement, ...] = ()


@dataclass(frozen=True)
class Edit:
    """A text edit on the decoded source: characters [start, end) become ``content``."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: Tuple[Edit, ...]


@dataclass(frozen=True)
class Location:
    """1-based line and column (columns count characters; end is exclusive)."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class NotebookCell:
    """The cell of a notebook that a finding or an error is in (its lines and columns count within the cell).

    ``index``: the cell's 1-based place among all the notebook's cells, markdown ones included (as
    ruff numbers them); ``file_line``: the line of the ``.ipynb`` file that holds the reported line
    of the cell (1 when the file does not keep one source line per line), for the formats that can
    only point into the file (SARIF, GitHub annotations).
    """

    index: int
    file_line: int = 1


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    path: str
    location: Location
    message: str
    fix: Optional[Fix] = None
    # Edit positions as (line, column, end_line, end_column), 1-based, for reports.
    fix_edit_locations: Tuple[Tuple[int, int, int, int], ...] = ()
    confidence: Confidence = Confidence.HIGH
    # In a notebook: the finding's cell, and the 1-based cell index of each edit (an import may go to another cell).
    cell: Optional[NotebookCell] = None
    fix_edit_cells: Tuple[int, ...] = ()

    @property
    def sort_key(self) -> Tuple[str, int, int, int, str]:
        return (self.path, self.cell.index if self.cell else 0, self.location.line, self.location.column, self.code)


@dataclass(frozen=True)
class Diagnostic:
    """A problem with the run itself (unparsable file, unreadable path, rule crash)."""

    path: str
    message: str
    line: int = 1
    column: int = 1
    kind: str = "error"  # "parse", "decode", "io", "internal"
    cell: Optional[NotebookCell] = None  # in a notebook: the cell that line and column count in

    @property
    def sort_key(self) -> Tuple[str, int, int, int]:
        return (self.path, self.cell.index if self.cell else 0, self.line, self.column)
