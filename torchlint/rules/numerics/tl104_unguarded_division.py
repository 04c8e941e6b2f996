from __future__ import annotations

import ast

from typing import Optional

import libcst as cst

from torchlint.analysis.domain import DIV, DIV_FUNCTIONS, DomainOp, call_names, constant_value
from torchlint.analysis.fixes import clamp_operand_fix, eps_text, functional_reference
from torchlint.rule import Applicability, FixSpec, Replacement
from torchlint.rules.numerics.unguarded import UnguardedOpRule


class UnguardedDivision(UnguardedOpRule):
    """
    ## What it does
    Flags a division by a tensor reduction that can be 0: `a / d`, `a /= d`,
    `torch.div(a, d)`, `a.div(d)` where `d` is

    - a count: `mask.sum()`, `mask.float().sum(dim)`, `(labels != ignore).sum()`,
      `torch.count_nonzero(m)` (also through a name: `n = mask.sum()`);
    - a magnitude: `x.norm(...)`, `torch.norm`, `torch.linalg.norm`,
      `torch.linalg.vector_norm`, `x.std()`, `x.var()`, a sum of squares or
      absolute values, or a product of these;
    - in particular the hand-written normalisation `x / x.norm(dim=d, keepdim=True)`
      and cosine similarity `(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))`.

    A divisor counts as guarded (see `torchlint/analysis/guards.py`) when it
    adds a positive literal or an eps-like name (`std + eps`), is clamped to a
    positive minimum (`mask.sum().clamp_min(1)`, `clamp(min=1e-9)`), is bound
    earlier to such a value (`denom = torch.clamp(mask.sum(1), min=1e-9)`), or
    sits under `if mask.any():` / `if n > 0:` / an earlier `if n == 0: return`.
    A test of the expression a name holds guards the name:
    `0 if kept.sum() == 0 else num / denom` with `denom = kept.sum()`, and a
    test of a name guards the expression it holds, recomputed from the same
    inputs (`n = mask.sum()`, `if n == 0: return`, then `loss / mask.sum()`); a
    count's truth guards it (`if mask.sum(): ... / mask.sum()`), and so does
    the test around every same-file call of a loss helper, read with the
    call's arguments (`if fg_mask.sum(): self.seg_loss(fg_mask, ...)` guards
    `/ fg_mask.sum()` inside `seg_loss`). The
    norm of random draws (`slices = torch.randn(d, k)`, then
    `slices / slices.norm(dim=0)`) is positive: a column of continuous draws
    is never all zero.

    A sum of values whose sign the linter cannot see (`w / w.sum()`) is not
    flagged: such sums are usually of positive weights, and a clamp would be
    wrong for a sum that may be negative.

    Counts of a *padding mask* are not flagged either: `attention_mask.sum(1)`,
    `tokens.ne(self.pad).sum(-1)`, `(~key_padding_mask).sum(1)`, a length mask
    `arange(T)[None] < lengths[:, None]` or `length_to_mask(lengths)`, through
    casts, reshapes and local names. Such a mask marks the real positions of
    sequences padded to the longest one: every sequence has a token (a
    tokenizer adds its special tokens even to an empty text) and the longest
    sequence covers every position, so the count is at least 1 (measured on
    the corpus: mean pooling over attention masks was the largest class of
    false alarms). A loss mask (`labels != -100`, a foreground mask), whose
    count is 0 for an all-ignored batch, is still flagged. A mask passed in as
    a parameter with an uninformative name (`mask`) cannot be told apart and
    is flagged.

    ## Why is this bad?
    An all-padding batch, an empty mask or a zero feature vector makes the
    divisor exactly 0: `0 / 0` is NaN and `x / 0` is `inf` in the forward
    pass, and the gradient of `a / d` contains `1 / d` and `a / d**2`, so the
    backward pass is NaN too. One such batch puts NaN into every weight at the
    next optimizer step. The norm of a zero vector also has a NaN gradient of
    its own (`x / |x|` at 0).

    ## Example
    ```python
    mean = (loss * mask).sum() / mask.sum()
    unit = x / x.norm(dim=-1, keepdim=True)
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    z = (x - x.mean(0)) / x.std(0)
    ```

    ## Use instead
    ```python
    mean = (loss * mask).sum() / mask.sum().clamp_min(1)
    unit = F.normalize(x, dim=-1, eps=1e-6)
    cos = F.cosine_similarity(a, b, dim=-1, eps=1e-6)
    z = (x - x.mean(0)) / x.std(0).clamp_min(1e-6)
    ```

    ## Fix safety
    Numerics. Counts are clamped to 1 (an empty mask then gives 0 instead of
    NaN; any non-empty count is unchanged). Norms, standard deviations,
    variances and sums of squares are clamped to eps from
    `[tool.torchlint] eps` (default 1e-6). `x / x.norm(dim=d, keepdim=True)`
    becomes `F.normalize(x, dim=d, eps=...)` (same values: F.normalize divides
    by the same norm, clamped) and the manual cosine becomes
    `F.cosine_similarity(a, b, dim=d, eps=...)`, which agrees with the manual
    formula to rounding (1e-7 relative in float32; it normalises before the
    dot product, so in float16/bfloat16 the two differ by the dtype's rounding).
    The eps is passed explicitly because the functions' own defaults (1e-12,
    1e-8) round to 0 in float16, where they give NaN again.
    `torch.nn.functional` is imported as `F` unless the file has an alias.

    In float16 the gradient of `x / max(|x|, eps)` at `x = 0` is `1 / eps`,
    which overflows float16 (max 65504) for eps below about 2e-5: the forward
    value is finite with the default eps, but code that divides by norms in
    float16 (rather than under autocast, which computes norms in float32)
    should set `eps = 1e-4`.

    Where it looks: code that is differentiated, a `forward`, `__call__` or
    `training_step`, a function or class named for a loss, a file in a
    `loss`/`losses` module. Geometric solvers normalising null vectors and
    eigenvectors, and metric code, divide by norms that are nonzero by
    construction far more often than not (measured in
    `bench/results/precision_tl1.md`) and are not reported.

    Schedules, visualisation, helpers called only under `torch.no_grad()`
    and parameters judged by what the same file's calls pass: as for TL101
    (`torchlint rule TL101`).

    Not detected: divisors computed in a function of another file or stored
    in attributes (same-file helpers are followed, as for TL101), and sums
    whose non-negativity the linter cannot see.
    """

    code = "TL104"
    name = "unguarded-division"
    message = "division by a reduction that can be 0 (empty mask, zero vector, constant feature): NaN/inf; clamp the divisor"
    fix_applicability = Applicability.NUMERICS
    triggers = ("/", "div(", "divide(")

    op_kinds = frozenset({DIV})
    callee_names = call_names(DIV_FUNCTIONS)
    operators = (ast.Div,)
    needs_site = True

    def fix(self, node: cst.CSTNode, op: DomainOp) -> Optional[FixSpec]:
        divisor = op.divisor
        if divisor.kind in ("sum", "difference"):
            return None  # a value of unknown sign: a clamp would turn a negative divisor positive
        eps = eps_text(self.context)
        if divisor.kind == "normalize" and isinstance(op.node, cst.BinaryOperation):
            return self._normalize_fix(op, eps)
        if divisor.kind == "cosine" and isinstance(op.node, cst.BinaryOperation):
            return self._cosine_fix(op, eps)
        minimum = "1" if divisor.kind == "count" else eps
        what = "Clamp the count to 1" if divisor.kind == "count" else "Clamp the divisor to eps"
        return clamp_operand_fix(self.context, op, minimum, what)

    def _normalize_fix(self, op: DomainOp, eps: str) -> Optional[FixSpec]:
        divisor = op.divisor
        order = divisor.norm_order
        if order is not None and constant_value(order) is None:
            return None
        reference, imports = functional_reference(self.context)
        tensor = self.context.code(divisor.normalized)
        dim = self.context.code(divisor.dim)
        order_text = "" if order is None or constant_value(order) == 2 else f"p={self.context.code(order)}, "
        text = f"{reference}.normalize({tensor}, {order_text}dim={dim}, eps={eps})"
        return self._replace(op, text, imports, "Use F.normalize")

    def _cosine_fix(self, op: DomainOp, eps: str) -> Optional[FixSpec]:
        first, second = op.divisor.cosine_operands
        reference, imports = functional_reference(self.context)
        text = (
            f"{reference}.cosine_similarity({self.context.code(first)}, {self.context.code(second)}, "
            f"dim={self.context.code(op.divisor.dim)}, eps={eps})"
        )
        return self._replace(op, text, imports, "Use F.cosine_similarity")

    def _replace(self, op: DomainOp, text: str, imports, message: str) -> FixSpec:
        new = cst.parse_expression(text).with_changes(lpar=op.node.lpar, rpar=op.node.rpar)
        return FixSpec(Applicability.NUMERICS, message, (Replacement(op.node, new),), imports)
