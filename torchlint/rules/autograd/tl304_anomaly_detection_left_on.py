from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.model.calls import argument, has_star_args
from torchlint.analysis.flow.module_evidence import in_debug_condition, is_test_path
from torchlint.analysis.model import conventions
from torchlint.rule import WHOLE_FILE, Applicability, FixSpec, Replacement, Rule

SET_DETECT_ANOMALY = frozenset({"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"})
DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
# The environment variable the fix gates anomaly mode behind.
GATE_VARIABLE = "DETECT_ANOMALY"


class AnomalyDetectionLeftOn(Rule):
    """
    ## What it does
    Flags `torch.autograd.set_detect_anomaly(True)` and
    `with torch.autograd.detect_anomaly():` that run unconditionally: not
    under an `if` or a conditional expression (on a flag, an argument, an
    environment variable: any test but a constant or `__name__ == "__main__"`),
    not in a function whose name says debug/check/anomaly, not in a `test*`
    function, and not in a test file (`tests/`, `test_*.py`, `*_test.py`,
    `conftest.py`). `set_detect_anomaly(flag)` with anything but a literal
    `True` is left alone.

    ## Why is this bad?
    Anomaly mode records a Python stack trace for every operation of every
    forward pass and checks every backward result for NaN. It is a debugging
    tool: left on, training runs several times slower (with torch 2.13 on
    CPU, 10 steps of a 12-layer MLP ran 3x to 11x slower in our runs of the
    runtime test; the cost is per operation, so small models suffer most),
    and once on it stays on
    for the whole process. It is easy to leave behind after hunting a NaN.

    ## Example
    ```python
    torch.autograd.set_detect_anomaly(True)
    for x, y in loader:
        ...
    ```

    ## Use instead
    ```python
    torch.autograd.set_detect_anomaly(os.environ.get("DETECT_ANOMALY") == "1")
    ```
    or remove the line.

    ## Fix safety
    Unsafe: the fix gates anomaly mode behind the environment variable
    `DETECT_ANOMALY` (`set_detect_anomaly(os.environ.get("DETECT_ANOMALY") == "1")`;
    `with detect_anomaly():` becomes `with set_detect_anomaly(...)`, which is
    also a context manager, `check_nan=` kept), adding `import os` when
    needed. Runs that relied on anomaly mode being on (to get the stack trace
    of a NaN) must now set `DETECT_ANOMALY=1`. A `detect_anomaly` imported by
    its bare name gets no fix.
    """

    code = "TL304"
    name = "anomaly-detection-left-on"
    message = (
        "autograd anomaly detection left on: every op records a stack trace and every backward "
        "is checked for NaN; training runs several times slower"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("anomaly",)

    @classmethod
    def prepass(cls, scan):
        return WHOLE_FILE if scan.regions_calling_qualified(SET_DETECT_ANOMALY | DETECT_ANOMALY) else None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified in SET_DETECT_ANOMALY:
            mode = argument(node, 0, "mode")
            if has_star_args(node) or mode is None or not (isinstance(mode.value, cst.Name) and mode.value.value == "True"):
                return
        elif qualified in DETECT_ANOMALY:
            if has_star_args(node) or not self._in_with_item(node):
                return
        else:
            return
        if is_test_path(self.context.path) or in_debug_condition(self.context) or self._in_test_function():
            return
        self.report(node, fix=self._fix(node, qualified))

    def _in_with_item(self, node: cst.Call) -> bool:
        parent = self.context.parent
        return isinstance(parent, cst.WithItem) and parent.item is node

    def _in_test_function(self) -> bool:
        return conventions.says(
            any(isinstance(n, cst.FunctionDef) and n.name.value.startswith("test") for n in self.context.ancestors)
        )

    def _fix(self, node: cst.Call, qualified: str) -> Optional[FixSpec]:
        os_ref, requirement = self.context.reference("os", "os")
        gate = cst.parse_expression(f'{os_ref}.environ.get("{GATE_VARIABLE}") == "1"')
        if qualified in SET_DETECT_ANOMALY:
            mode = argument(node, 0, "mode")
            new = node.with_deep_changes(mode, value=gate)
        else:
            if not isinstance(node.func, cst.Attribute):
                return None
            func = node.func.with_changes(attr=cst.Name("set_detect_anomaly"))
            args = [cst.Arg(gate)]
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "check_nan":
                    args = [
                        cst.Arg(gate, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                        arg.with_changes(comma=cst.MaybeSentinel.DEFAULT),
                    ]
                elif arg.keyword is not None or arg.star:
                    return None
                else:  # detect_anomaly(check_nan) positional
                    args = [
                        cst.Arg(gate, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                        arg.with_changes(comma=cst.MaybeSentinel.DEFAULT),
                    ]
            new = node.with_changes(func=func, args=args)
        return FixSpec(
            Applicability.UNSAFE,
            f"Turn it on only when the environment variable {GATE_VARIABLE}=1",
            (Replacement(node, new),),
            tuple(r for r in (requirement,) if r),
        )
