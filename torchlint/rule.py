"""The Rule base class and the types every rule and formatter share.

A rule is a LibCST visitor that lives for one file: the engine builds one
instance per enabled rule per file, calls its ``visit_<Node>`` /
``leave_<Node>`` methods during the single traversal, and collects what it
``report()``s.  A rule's docstring is its documentation page
(``torchlint rule CODE``), written in the ruff style: What it does / Why is
this bad? / Example / Use instead / Fix safety.
"""
from __future__ import annotations

import dataclasses
import enum
import inspect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst

    from torchlint.context import FileContext
    from torchlint.prepass import Scan, Seeds


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


@dataclass
class PendingReport:
    """A report held until positions are known (computed only for files with findings)."""

    rule: "Rule"
    node: cst.CSTNode
    message: str
    fix: Optional[FixSpec] = None
    # Indentation of the enclosing blocks, to render multi-line replacements.
    indents: Tuple[str, ...] = ()
    # The outermost nodes enclosing the reported one, below the module (at most three: a
    # top-level class, its body, the member): where the engine first computes positions.
    enclosing: Tuple[cst.CSTNode, ...] = ()
    confidence: Confidence = Confidence.HIGH


_CODE_RE = re.compile(r"^TL[1-9][0-9]{2}$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class Rule:
    """Base class: subclass it in ``torchlint/rules/<family>/`` and it is registered."""

    code: ClassVar[str]
    name: ClassVar[str]
    # The one-line message: what breaks at run time.
    message: ClassVar[str]
    # Class of the rule's fix, or None when the rule never fixes (say why in the docs).
    fix_applicability: ClassVar[Optional[Applicability]] = None
    # The confidence of a finding that does not say otherwise (``report(confidence=...)``).
    confidence: ClassVar[Confidence] = Confidence.HIGH
    # What decides the level of this rule's findings when it varies (a few lines, markdown; for the docs page).
    confidence_levels: ClassVar[str] = ""
    # Substrings of which at least one must occur in a file for the rule to fire there;
    # the engine skips parsing files that contain no trigger of any enabled rule.
    triggers: ClassVar[Tuple[str, ...]] = ()
    default_enabled: ClassVar[bool] = True
    # The rule asks what a function's same-file callers pass it (torchlint/analysis/callers.py): the
    # pre-pass then keeps, with its seeds, the regions that mention a function defined in them.
    reads_callers: ClassVar[bool] = False

    def __init__(self, context: "FileContext") -> None:
        self.context = context
        self.reports: List[PendingReport] = []

    @classmethod
    def prepass(cls, scan: "Scan") -> "Seeds":
        """Where in the file (read with ``ast``) this rule may report: None (nowhere, it does not
        run), ``WHOLE_FILE``, or the regions of ``scan`` it reports in (see torchlint/prepass.py).
        Must be a necessary condition of every report.  By default: anywhere, looking anywhere."""
        return WHOLE_FILE

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        fix: Optional[FixSpec] = None,
        confidence: Optional[Confidence] = None,
    ) -> None:
        level = confidence or self.confidence
        if fix is not None and fix.applicability is Applicability.NUMERICS and not level.at_least(DEFAULT_CONFIDENCE_FLOOR):
            # A numerics fix changes values at the domain edge: sure enough for --fix only where the finding
            # keeps the default level's promise; below it the same edit may change a correct program.
            fix = dataclasses.replace(fix, applicability=Applicability.UNSAFE)
        indents = self.context.current_indents() if fix is not None else ()
        enclosing = tuple(self.context.ancestors[1:4])
        self.reports.append(
            PendingReport(self, node, message or self.message, fix, indents, enclosing, level)
        )

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def validate_metadata(cls) -> None:
        """Fail loudly at import time on a malformed rule rather than at lint time."""
        if not _CODE_RE.match(getattr(cls, "code", "")):
            raise TypeError(f"{cls.__qualname__}: bad rule code {getattr(cls, 'code', None)!r}")
        if not _NAME_RE.match(getattr(cls, "name", "")):
            raise TypeError(f"{cls.__qualname__}: bad rule name {getattr(cls, 'name', None)!r}")
        if not getattr(cls, "message", "") or "\n" in cls.message:
            raise TypeError(f"{cls.__qualname__}: needs a one-line message")
        if not cls.triggers:
            raise TypeError(f"{cls.__qualname__}: needs at least one trigger substring")
        doc = cls.documentation()
        for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
            if heading not in doc:
                raise TypeError(f"{cls.__qualname__}: documentation lacks {heading!r}")


def handler_names(rule_cls: type) -> Sequence[str]:
    """The ``visit_X`` / ``leave_X`` methods a rule class defines."""
    return [n for n in dir(rule_cls) if n.startswith(("visit_", "leave_")) and callable(getattr(rule_cls, n))]
