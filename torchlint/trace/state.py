"""What the traced process records, before and after torch is imported (no torch here).

``Probes`` is the object instrumented code calls (``__torchlint__.operand(3, x)``): until torch is
imported its methods pass values through; ``runtime`` then puts the checking ones in their place.
``Recorder`` keeps, per site, how often its operand was checked and what the first check at the
edge saw, the run's step counts and the first non-finite value, and writes them as the results file.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Tuple

from torchlint.trace.plan import EPS, UPPER_BOUND, ZERO, Plan, SitePlan, write_json

# The edges a TL105 site checks with two probes (the eps and the tensor it meets, in either order).
PAIRED_EDGES = (EPS, UPPER_BOUND)
# Why a run ended before the program did.
STOPPED_MAX_STEPS = "max-steps"
STOPPED_FIRST_NONFINITE = "first-nonfinite"


class TraceStopped(BaseException):
    """Ends the program early (``--max-steps``, ``--stop-on-first``); a BaseException so that
    ``except Exception`` in the program lets it through."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Probes:
    """The calls instrumented code makes; each returns its value, the very object it was given."""

    def operand(self, site: int, value: Any) -> Any:
        return value

    def numerator(self, site: int, value: Any) -> Any:
        return value

    def exponent(self, site: int, value: Any) -> Any:
        return value

    def eps(self, site: int, value: Any) -> Any:
        return value

    def output(self, site: int, value: Any) -> Any:
        return value


class SiteRecord:
    """What one site's checks saw over the run."""

    def __init__(self, plan: SitePlan) -> None:
        self.edge = plan.edge
        self.calls = 0
        self.calls_at_edge = 0
        self.edge_entries = 0
        self.first: Optional[Dict[str, Any]] = None  # the first call at the edge
        self.low: Optional[float] = None  # smallest operand (smallest |operand| for divisors and 1 + x)
        self.high: Optional[float] = None
        self.dtype: Optional[str] = None
        self.zero_over_zero = 0
        self.exponent: Optional[float] = None  # the last exponent a power site met
        self.eps: Optional[float] = None  # the last eps (or bound 1 - eps) a TL105 site met
        # Calls whose operand was already Inf/NaN: an Inf/NaN gradient there is not born at this op.
        self.nonfinite_calls: set = set()
        self.gradient_calls = 0
        self.gradient_first: Optional[Dict[str, Any]] = None
        # Halves of a check that two probes complete (a division's numerator, a TL105 guard's eps).
        self.pending_numerator: Any = None
        self.pending_operand: Any = None  # a power's base until its exponent comes; (dtype, entries) an eps meets
        self.pending_eps: Any = None

    def evidence(self) -> Dict[str, Any]:
        evidence: Dict[str, Any] = {"edge": self.edge, "calls": self.calls, "calls_at_edge": self.calls_at_edge}
        if self.low is not None:
            evidence["min_abs" if self.edge in (ZERO, "absorbed", "absorbed_exp") else "min"] = self.low
        if self.high is not None:
            evidence["max"] = self.high
        if self.dtype is not None:
            evidence["dtype"] = self.dtype
        if self.first is not None:
            evidence.update(self.first)
            evidence["edge_entries_total"] = self.edge_entries
        if self.exponent is not None:
            evidence["exponent"] = self.exponent
        if self.eps is not None:
            evidence["eps"] = self.eps
            evidence["rounded"] = self.low
        if self.edge == ZERO and self.zero_over_zero:
            evidence["zero_over_zero_entries"] = self.zero_over_zero
        evidence["gradient"] = (
            {"nonfinite_calls": self.gradient_calls, **(self.gradient_first or {})} if self.gradient_calls else None
        )
        return evidence

    @property
    def confirmed(self) -> bool:
        return self.calls_at_edge > 0 or self.gradient_calls > 0


class Recorder:
    """The run's records, and the results file they are written to."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.sites: Dict[int, SiteRecord] = {site.site: SiteRecord(site) for sites in plan.sites.values() for site in sites}
        self.not_instrumented: Dict[int, str] = {}
        self.optimizer_steps = 0
        self.backward_calls = 0
        self.first_nonfinite: Optional[Dict[str, Any]] = None
        # Mixed precision: steps a GradScaler skipped (counted in optimizer_steps too), the scaled backward
        # passes whose Inf came from the scale (see runtime), and the first of them.
        self.scaler_skipped_steps = 0
        self.scaler_overflows = 0
        self.first_overflow: Optional[Dict[str, Any]] = None
        self.stopped: Optional[str] = None
        self.torch_imported = False
        self.errors: List[str] = []
        # Code that ran out of the watch's sight, in words (DataLoader workers, torch.compile'd code).
        self.unwatched: List[str] = []
        self._owner = os.getpid()  # forked workers (DataLoader) inherit this object; only the traced process writes

    def moment(self, counts: Optional[Tuple[int, int]] = None) -> Dict[str, int]:
        """When something happened: optimizer steps and backward passes completed before it (now, or at the
        :meth:`counts` taken then: the cheap form a deferred check keeps until its value is read)."""
        steps, backward_calls = counts if counts is not None else self.counts()
        return {"step": steps, "backward_calls": backward_calls}

    def counts(self) -> Tuple[int, int]:
        return self.optimizer_steps, self.backward_calls

    def not_watched(self, what: str) -> None:
        if what not in self.unwatched and len(self.unwatched) < 20:
            self.unwatched.append(what)

    def error(self, message: str) -> None:
        if len(self.errors) < 20 and message not in self.errors:
            self.errors.append(message)

    def results(self) -> Dict[str, Any]:
        sites = {}
        for number, record in self.sites.items():
            if number in self.not_instrumented:
                sites[str(number)] = {"instrumented": False, "reason": self.not_instrumented[number]}
            else:
                sites[str(number)] = {"instrumented": True, "confirmed": record.confirmed, "evidence": record.evidence()}
        return _json_safe(
            {
                "sites": sites,
                "first_nonfinite": self.first_nonfinite,
                "run": {
                    "optimizer_steps": self.optimizer_steps,
                    "backward_calls": self.backward_calls,
                    "scaler_skipped_steps": self.scaler_skipped_steps,
                    "scaler_overflows": self.scaler_overflows,
                    "first_overflow": self.first_overflow,
                    "stopped": self.stopped,
                    "torch_imported": self.torch_imported,
                    "errors": self.errors,
                    "unwatched": self.unwatched,
                },
            }
        )

    def write(self) -> None:
        if os.getpid() != self._owner or not self.plan.results_path:  # an in-process watch keeps them in memory
            return
        try:
            write_json(self.plan.results_path, self.results())
        except OSError as exc:
            self.error(f"cannot write the results: {exc}")


def _json_safe(value: Any) -> Any:
    """Inf and NaN as the strings "inf", "-inf", "nan": JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value

