"""What the torchlint process and the traced process exchange: the sites to instrument, and what the run saw.

Both are JSON files.  The plan names, per project file, the sites of the static findings: the span of
the expression to check (the op's operand), which edge of the op's domain to check it against, and
the spans of a partner value (a division's numerator, the eps a TL105 guard adds) and of the op whose
gradient to watch.  Spans are 1-based (line, column, end line, end column) in characters, as the
findings give them.  Nothing here imports torch or LibCST.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

Span = Tuple[int, int, int, int]

# The edges an operand is checked against, and how the report names them.
NONPOSITIVE = "nonpositive"  # the operand of a root, log or fractional power at or below 0
ZERO = "zero"  # a divisor at 0 (0/0 when the numerator is 0 there too)
POWER = "power"  # the base of a power, judged with the exponent the run gives it (0 or below 0, see runtime)
OVERFLOW = "overflow"  # the sum of exps under a log: inf, or 0
ABSORBED = "absorbed"  # x in log(1 + x): not 0, yet 1 + x rounds to 1
ABSORBED_EXP = "absorbed_exp"  # x in exp(x) - 1: not 0, yet exp(x) rounds to 1
SATURATED = "saturated"  # a probability fed to binary cross entropy at exactly 0 or 1
UNIT = "unit"  # the operand of acos, asin or atanh at or past ±1
PROBABILITIES = "probabilities"  # probabilities (all in [0, 1]) fed where logits or log-probabilities belong
NONFINITE = "nonfinite"  # Inf/NaN that a filter removes after the op
MASK = "mask"  # the entries a masked assignment overwrites
EPS = "eps"  # an eps that rounds to 0 (or whose reciprocal overflows) in the dtype it meets
UPPER_BOUND = "upper_bound"  # a bound 1 - eps that rounds to 1 in the dtype it meets

EDGE_WORDS: Dict[str, str] = {
    NONPOSITIVE: "at or below 0",
    ZERO: "at 0",
    POWER: "at the edge of their power (0 under an exponent below 1, below 0 under a fractional one)",
    OVERFLOW: "inf, or 0 under the log",
    ABSORBED: "lost in 1 + x",
    ABSORBED_EXP: "lost in exp(x) - 1",
    SATURATED: "at exactly 0 or 1",
    UNIT: "at or past ±1",
    PROBABILITIES: "in [0, 1]: probabilities where the loss wants logits or log-probabilities",
    NONFINITE: "Inf/NaN that the filter hides",
    MASK: "overwritten by the masked assignment",
    EPS: "losing the eps in their dtype",
    UPPER_BOUND: "losing the bound 1 - eps in their dtype",
}


@dataclass
class SitePlan:
    """One finding's site: what to check where (see the module docs)."""

    site: int
    code: str
    edge: str
    operand: Span
    # A second value the check needs, probed where it is evaluated: a division's numerator, a power's
    # exponent, the eps of a TL105 guard.
    partner: Optional[Span] = None
    gradient: Optional[Span] = None
    # The operand is an augmented assignment's target: it is read by a statement of its own just before.
    operand_before: bool = False

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> SitePlan:
        spans = {key: tuple(data[key]) if data.get(key) else None for key in ("operand", "partner", "gradient")}
        return cls(data["site"], data["code"], data["edge"], spans["operand"], spans["partner"], spans["gradient"], data["operand_before"])


@dataclass
class Plan:
    """Everything the traced process needs besides the program's own command line."""

    results_path: str
    # Project files (absolute, real paths): their frames are "the user's code".
    project_files: List[str] = field(default_factory=list)
    # Real path of a project file -> its sites.
    sites: Dict[str, List[SitePlan]] = field(default_factory=dict)
    max_steps: Optional[int] = None
    stop_on_first: bool = False
    # Read device-side checks every this many ops on accelerators (CPU values are read at once).
    sync_every: int = 256

    def write(self, path: str) -> None:
        write_json(path, asdict(self))

    @classmethod
    def read(cls, path: str) -> Plan:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        data["sites"] = {file: [SitePlan.from_json(site) for site in sites] for file, sites in data["sites"].items()}
        return cls(**data)


def write_json(path: str, data: Any) -> None:
    """Write ``data`` so that a reader never sees half a file (temporary file + rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".torchlint-trace-", suffix=".json", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
