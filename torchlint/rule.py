"""The Rule base class (the types of findings and fixes live in torchlint/findings.py).

A rule is a LibCST visitor that lives for one file: the engine builds one
instance per enabled rule per file, calls its ``visit_<Node>`` /
``leave_<Node>`` methods during the single traversal, and collects what it
``report()``s.  A rule's docstring is its documentation page
(``torchlint rule CODE``), written in the ruff style: What it does / Why is
this bad? / Example / Use instead / Fix safety.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst

    from torchlint.analysis.model.file_context import FileContext
    from torchlint.prepass import Scan, Seeds

from torchlint.findings import (
    WHOLE_FILE,
    Confidence,
    DEFAULT_CONFIDENCE_FLOOR,
    Applicability,
    ImportRequirement,
    Replacement,
    FixSpec,
    Edit,
    Fix,
    Location,
    NotebookCell,
    Finding,
    Diagnostic,
)

# The shared types a rule imports from here with the base class.
__all__ = [
    "WHOLE_FILE", "Confidence", "DEFAULT_CONFIDENCE_FLOOR", "Applicability", "ImportRequirement", "Replacement",
    "FixSpec", "Edit", "Fix", "Location", "NotebookCell", "Finding", "Diagnostic", "PendingReport", "Rule",
    "handler_names", "ANY_TEXT",
]


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
    # Set when the code holding it is unreached (``confidence`` is then ``low``): the level the analysis found,
    # which the measured table maps before reachability lowers it.
    found_unreached: Optional[Confidence] = None
    # A form no validation draw has read yet: the measured level table (which measured other forms of the rule)
    # does not move it.
    unmeasured: bool = False


# The trigger every text holds: the rule's ast pre-pass alone decides where it runs.
ANY_TEXT: Tuple[str, ...] = ("",)

# ``off``: findings are shown at the level the analysis found, before the measured table (what
# ``bench/validate.py --calibrate`` reads to apply the decision rule again).
LEVEL_TABLE_VARIABLE = "TORCHLINT_LEVEL_TABLE"


@functools.lru_cache(maxsize=None)
def measured_level_moves() -> Dict[str, str]:
    """``CODE:level`` -> the level its findings are shown at (torchlint/data/level_calibration.json)."""
    if os.environ.get(LEVEL_TABLE_VARIABLE) == "off":
        return {}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "level_calibration.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return dict(json.load(handle).get("moves", {}))
    except (OSError, ValueError):
        return {}


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
    # Substrings of which at least one must occur in a file for the rule to fire there; the engine skips
    # parsing files that contain no trigger of any enabled rule. A necessary condition of every report,
    # whatever the spelling (spaces, aliases, star imports): words, not punctuation-bound fragments
    # (tests/test_generated.py checks findings with and without it are the same). ANY_TEXT: no condition.
    triggers: ClassVar[Tuple[str, ...]] = ()
    default_enabled: ClassVar[bool] = True
    # The rule asks what a function's same-file callers pass it (torchlint/analysis/flow/callers.py): the
    # pre-pass then keeps, with its seeds, the regions that mention a function defined in them.
    reads_callers: ClassVar[bool] = False
    # The rule weighs naming conventions itself, per op (analysis/project/guards.py assess): the engine does not
    # walk the file again for it with conventions off (analysis/model/conventions.py).
    judges_names: ClassVar[bool] = False

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
        unmeasured: bool = False,
        at_compile_time: bool = False,
    ) -> None:
        """``at_compile_time``: the failure is the file's own syntax (it breaks every run that imports or runs the
        file, before any line of it runs), so only a file no run compiles is unreached."""
        from torchlint.analysis.project.reached import never_compiled, unreached  # LibCST's: a warm run that only reads its cache needs neither

        level = found = confidence or self.confidence
        is_unreached = never_compiled(self.context) if at_compile_time else unreached(self.context)
        if is_unreached:
            # Nothing in the project names the function or class holding it: it happens only if a user of the
            # project calls that code (analysis/project/reached.py).
            level = Confidence.LOW
        if fix is not None and fix.applicability is Applicability.NUMERICS and not level.at_least(DEFAULT_CONFIDENCE_FLOOR):
            # A numerics fix changes values at the domain edge: sure enough for --fix only where the finding
            # keeps the default level's promise; below it the same edit may change a correct program.
            fix = dataclasses.replace(fix, applicability=Applicability.UNSAFE)
        indents = self.context.current_indents() if fix is not None else ()
        enclosing = tuple(self.context.ancestors[1:4])
        self.reports.append(
            PendingReport(self, node, message or self.message, fix, indents, enclosing, level, found if is_unreached else None, unmeasured)
        )

    @classmethod
    def shown_level(cls, level: Confidence) -> Confidence:
        """The level a finding of this rule found at ``level`` is shown at: what validation draws measured of
        that form (torchlint/data/level_calibration.json; the decision rule of a level's promise)."""
        moved = measured_level_moves().get(f"{cls.code}:{level.value}")
        return Confidence(moved) if moved else level

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
