"""The trace report: each finding confirmed or not reached, and the first non-finite value (text and JSON)."""
from __future__ import annotations

import json
import linecache
import os
from typing import Any, Dict, List, Optional, Sequence

from torchlint.report.json_format import finding_to_dict
from torchlint.rule import Diagnostic, Finding
from torchlint.trace.plan import EDGE_WORDS, EPS, UPPER_BOUND

NOT_REACHED = "not reached in this run"


def display_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    if path.startswith("<"):  # a notebook cell or other code with no file: its name as Python gave it
        return path
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.getcwd())
    return absolute if relative.startswith(os.pardir) else relative


class TraceReport:
    def __init__(
        self,
        findings: Sequence[Finding],
        results: Optional[Dict[str, Any]],
        missing: Dict[int, str],
        diagnostics: Sequence[Diagnostic] = (),
        max_steps: Optional[int] = None,
        rank: Optional[int] = None,
        tool: str = "torchlint trace",
    ) -> None:
        self.tool = tool
        self.findings = findings
        self.rank = rank  # one rank of several: its report says so
        self.results = results or {}
        self.sites: Dict[str, Any] = self.results.get("sites", {})
        self.missing = missing
        self.diagnostics = diagnostics
        self.max_steps = max_steps
        self.run: Dict[str, Any] = self.results.get("run", {})

    def verdict(self, index: int) -> Dict[str, Any]:
        """{"confirmed": bool, "evidence": {...}} of one finding."""
        if index in self.missing:
            return {"confirmed": False, "evidence": {"instrumented": False, "reason": self.missing[index]}}
        site = self.sites.get(str(index))
        if site is None:
            reason = "the program ended before the run was recorded" if not self.results else "not instrumented"
            return {"confirmed": False, "evidence": {"instrumented": False, "reason": reason}}
        if not site.get("instrumented", True):
            return {"confirmed": False, "evidence": {"instrumented": False, "reason": site.get("reason", "")}}
        return {"confirmed": bool(site.get("confirmed")), "evidence": site.get("evidence", {})}

    def first_nonfinite(self) -> Optional[Dict[str, Any]]:
        event = self.results.get("first_nonfinite")
        if not event:
            return None
        event = dict(event)
        if event.get("path"):
            event["path"] = display_path(event["path"])
            event["source"] = _source_line(self.results["first_nonfinite"]["path"], event.get("line"))
            event["findings"] = [
                f.code
                for f in self.findings
                if os.path.realpath(f.path) == os.path.realpath(self.results["first_nonfinite"]["path"])
                and f.location.line <= event.get("line", 0) <= f.location.end_line
            ]
        return event

    # -- JSON -----------------------------------------------------------------------------------

    def document(self) -> Dict[str, Any]:
        items: List[Dict[str, Any]] = []
        for index, finding in enumerate(self.findings):
            item = finding_to_dict(finding)
            item.update(self.verdict(index))
            items.append(item)
        run = dict(self.run, rank=self.rank) if self.rank is not None else dict(self.run)
        if (run.get("first_overflow") or {}).get("path"):
            run["first_overflow"] = dict(run["first_overflow"], path=display_path(run["first_overflow"]["path"]))
        return {"findings": items, "first_nonfinite": self.first_nonfinite(), "run": run}

    def to_json(self) -> str:
        return json.dumps(self.document(), indent=2) + "\n"

    # -- text -----------------------------------------------------------------------------------

    def to_text(self) -> str:
        lines = []
        confirmed = sum(1 for index in range(len(self.findings)) if self.verdict(index)["confirmed"])
        if self.findings:
            lines.append(f"{self.tool}: {confirmed} of {_count(len(self.findings), 'finding')} confirmed in this run ({self._run_words()})")
        else:
            lines.append(f"{self.tool}: no numerics or fused-op findings in this project ({self._run_words()})")
        for index, finding in enumerate(self.findings):
            lines.append(f"{finding.path}:{finding.location.line}:{finding.location.column}: {finding.code} {self._finding_words(index)}")
        lines.append(self.first_words())
        if self.run.get("scaler_overflows"):
            lines.append(self._overflow_words())
        stopped = self.run.get("stopped")
        if stopped == "max-steps":
            lines.append(f"the run was stopped after {_count(self.max_steps or 0, 'step')} (--max-steps)")
        elif stopped == "first-nonfinite":
            lines.append("the run was stopped at the first non-finite value (--stop-on-first)")
        for diagnostic in self.diagnostics:
            lines.append(f"not checked: {diagnostic.path}:{diagnostic.line}:{diagnostic.column}: {diagnostic.message}")
        for what in self.run.get("unwatched", []):
            lines.append(f"not watched: {what}")
        for error in self.run.get("errors", []):
            lines.append(f"trace: internal error, the run went on: {error}")
        if self.rank is not None:  # ranks print at once: every line says which one speaks
            lines = [f"[rank {self.rank}] {line}" for text in lines for line in text.split("\n")]
        return "\n".join(lines) + "\n"

    def _run_words(self) -> str:
        if not self.results:
            return "no record of the run: it ended before it could be written"
        if not self.run.get("torch_imported"):
            return "the program never imported torch"
        steps = _count(self.run.get("optimizer_steps", 0), "optimizer step")
        if self.run.get("scaler_skipped_steps"):
            steps += f" ({self.run['scaler_skipped_steps']} skipped by GradScaler)"
        return f"{steps}, {_count(self.run.get('backward_calls', 0), 'backward pass', 'backward passes')}"

    def confirmed_evidence(self, index: int) -> Optional[str]:
        """The first words of a confirmed finding's evidence (what ``check`` shows after a run), else None."""
        if not self.verdict(index)["confirmed"]:
            return None
        words = self._finding_words(index)
        return words[len("confirmed: ") :].split("; ")[0] if words.startswith("confirmed: ") else words

    def _finding_words(self, index: int) -> str:
        verdict = self.verdict(index)
        evidence = verdict["evidence"]
        if not evidence.get("instrumented", True):
            return f"not instrumented: {evidence.get('reason', '')}"
        if not verdict["confirmed"]:
            calls = evidence.get("calls", 0)
            if not calls:
                return f"{NOT_REACHED} (the site never ran)"
            closest = _closest(evidence)
            return f"{NOT_REACHED} (ran {_count(calls, 'time')}{closest})"
        parts = []
        if evidence.get("calls_at_edge"):
            edge = evidence.get("edge", "")
            if edge in (EPS, UPPER_BOUND):
                what = _eps_words(evidence)
            else:
                what = f"{evidence.get('edge_entries')} of {evidence.get('entries')} entries {EDGE_WORDS.get(edge, edge)} ({_number_words(evidence)}{evidence.get('dtype')})"
                if evidence.get("zero_over_zero_entries"):
                    what += f", 0/0 in {_count(evidence['zero_over_zero_entries'], 'entry', 'entries')} of the result"
            parts.append(
                f"confirmed: call {evidence.get('first_call')} ({_moment_words(evidence)}) had {what}; "
                f"{evidence.get('calls_at_edge')} of {_count(evidence.get('calls', 0), 'call')} at the edge"
            )
        gradient = evidence.get("gradient")
        if gradient:
            words = f"its gradient became {gradient.get('kind')} from a finite one at call {gradient.get('first_call')} ({_moment_words(gradient)})"
            parts.append(words if parts else f"confirmed: {words}")
        return "; ".join(parts)

    def first_words(self) -> str:
        event = self.first_nonfinite()
        if event is None:
            if not self.results or not self.run.get("torch_imported"):
                return "first non-finite value: not watched"
            return "first non-finite value: none, every value and gradient stayed finite"
        phase = event.get("phase")
        op = event.get("op", "")
        if event.get("from_other_rank"):
            through = op if op.startswith("torch.") else f"the {op}"
            what = f"{event.get('kind')} from another rank, received through {through}"
        elif phase == "backward":
            what = f"{event.get('kind')} in the gradient of {op}"
        else:
            what = f"{event.get('kind')} from {op} ({phase})"
        place = f"{event['path']}:{event['line']}" if event.get("path") else "outside the project's files"
        if event.get("in_backward_call"):
            place += " (the backward call; the forward line of this op is unknown)"
        line = f"first non-finite value: {what} at {place} ({_moment_words(event)})"
        if event.get("findings"):
            line += f"; {', '.join(sorted(set(event['findings'])))} is reported on this line"
        if event.get("source"):
            line += f"\n    {event['source'].strip()}"
        return line


    def _overflow_words(self) -> str:
        first = self.run.get("first_overflow") or {}
        place = f" at {display_path(first['path'])}:{first['line']}" if first.get("path") else ""
        return (
            f"overflow skipped by GradScaler: {_count(self.run['scaler_overflows'], 'scaled backward pass', 'scaled backward passes')} "
            f"made Inf that the loss scale alone explains, and the scaler skipped their steps (first: {first.get('kind')} in the "
            f"gradient of {first.get('op')}{place}); not counted as values born non-finite"
        )


def _count(number: int, word: str, plural: Optional[str] = None) -> str:
    return f"{number} {word if number == 1 else (plural or word + 's')}"


def _moment_words(moment: Dict[str, Any]) -> str:
    steps = moment.get("step", 0)
    backward = moment.get("backward_calls", 0)
    if moment.get("phase") == "backward":
        during = f"in backward pass {backward + 1}"
        return f"{during}, after {_count(steps, 'optimizer step')}" if steps else during
    if steps:
        return f"after {_count(steps, 'optimizer step')}"
    if backward:
        return f"after {_count(backward, 'backward pass', 'backward passes')}"
    return "before the first backward pass"


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _number_words(evidence: Dict[str, Any]) -> str:
    if "value_at_first" in evidence:
        name = "min |x|" if "min_abs" in evidence else "min"
        return f"{name} {_number(evidence['value_at_first'])}, "
    return ""


def _eps_words(evidence: Dict[str, Any]) -> str:
    name = "1 - eps" if evidence.get("edge") == UPPER_BOUND else "eps"
    return f"{name} = {evidence.get('eps')!r} is {evidence.get('rounded')!r} in {evidence.get('dtype')}"


def _closest(evidence: Dict[str, Any]) -> str:
    if "eps" in evidence:
        return f"; {_eps_words(evidence)}"
    if "min_abs" in evidence:
        return f"; smallest |x| {_number(evidence['min_abs'])}"
    if "min" in evidence:
        return f"; min {_number(evidence['min'])}" + (f", max {_number(evidence['max'])}" if "max" in evidence else "")
    return ""


def _source_line(path: str, line: Optional[int]) -> Optional[str]:
    if not line:
        return None
    if path.startswith("<"):  # a notebook cell: IPython keeps its text in linecache
        return linecache.getline(path, line).rstrip("\r\n") or None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, 1):
                if number == line:
                    return text.rstrip("\r\n")
    except OSError:
        return None
    return None
