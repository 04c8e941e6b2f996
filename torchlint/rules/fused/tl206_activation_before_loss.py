from __future__ import annotations

import ast
import re
from typing import Optional

import libcst as cst

from torchlint.analysis.model.ast_names import ast_dotted_name
from torchlint.analysis.values.fused import activation_of
from torchlint.analysis.model.calls import argument, has_star_args
from torchlint.analysis.model.ops import unmoved
from torchlint.analysis.values.losses import LOSS_MODULES, LOSS_NAMES, LossCall, match_loss, rewrite_activation, with_logits_replacements
from torchlint.analysis.project.module_outputs import trace_output
from torchlint.analysis.values.precision import project_uses_float16
from torchlint.analysis.model.project_index import active_project, facts_of_tree
from torchlint.analysis.flow.callers import constructor_passed_by_callers, framework_called
from torchlint.rule import Applicability, Confidence, FixSpec, Rule

MESSAGES = {
    "cross_entropy": (
        "cross_entropy applies log_softmax itself: on softmax outputs it softmaxes twice, "
        "the loss cannot fall below a floor and its gradient vanishes; pass the logits"
    ),
    "nll": "nll_loss expects log-probabilities: on softmax outputs it minimises -p instead of -log p; use log_softmax",
    "bce": (
        "binary_cross_entropy of a sigmoid output is clamped at 100 with a zero gradient once the sigmoid rounds "
        "to 0 or 1 (|x| > ~17), and raises under float16 autocast; use binary_cross_entropy_with_logits on the logits"
    ),
    "bce_logits": (
        "binary_cross_entropy_with_logits applies sigmoid itself: on {kind} outputs it squashes twice, "
        "the loss cannot reach 0 and its gradient vanishes; pass the logits"
    ),
}
FIX_MESSAGES = {
    "cross_entropy": "Drop the softmax: pass the logits",
    "nll": "Use `log_softmax` instead of `softmax`",
    "bce": "Use the `..._with_logits` loss on the logits",
    "bce_logits": "Drop the activation: pass the logits",
}
# The activations each loss must not be fed: those it applies itself, or probabilities where it wants log-probabilities.
WRONG_INPUTS = {
    "cross_entropy": ("softmax",),
    "nll": ("softmax",),
    "bce": ("sigmoid",),
    "bce_logits": ("sigmoid", "softmax"),
}
# Words that name an activation: a file without one can only get it from a module of the project.
ACTIVATION_WORDS = (
    "softmax", "Softmax", "Softmax2d", "sigmoid", "Sigmoid", "expit", "log_softmax", "LogSoftmax", "logsigmoid", "LogSigmoid"
)


class ActivationBeforeLoss(Rule):
    """
    ## What it does
    Flags an activation fed to a loss that does not want it:
    `F.cross_entropy(F.softmax(z, 1), y)` and `nn.CrossEntropyLoss()(...)` on a
    softmax (softmax twice); `F.nll_loss(F.softmax(z, 1), y)` / `nn.NLLLoss`
    on a softmax (probabilities where log-probabilities belong);
    `F.binary_cross_entropy(torch.sigmoid(z), y)` / `nn.BCELoss()` on a
    sigmoid; `F.binary_cross_entropy_with_logits` / `nn.BCEWithLogitsLoss` on
    a sigmoid or a softmax (squashed twice). The loss may be a function, a
    module built inline, in `__init__` (`self.criterion = nn.BCELoss()`),
    earlier in the function or at module level; the activation may be inline
    (also under `.view`, `.squeeze`, ...) or stored in a local name a few
    lines before the loss.

    The activation may also end what a model returns: the loss's input is
    the output of a module whose `forward` ends in (or returns) a softmax or
    sigmoid, or of an `nn.Sequential(..., nn.Softmax())` (the auxiliary
    classifier head of a GAN discriminator, `validity, label = D(x)`), or
    `torch.exp(log_softmax(...))`. The module is followed through names,
    `self.` attributes, `.to(device)`, tuple unpacking and the parameter of a
    training function that the file's own calls fill (`train(model, ...)`
    called with `Network()`); its class may live in the same file or in
    another module of the project (analysis/project/module_outputs.py says how).

    ## Why is this bad?
    `cross_entropy` computes `log_softmax` itself: on probabilities the
    per-sample loss can never go below `log(1 + (C - 1) / e)` (0.55 for
    C = 3) and its gradient shrinks as the model grows confident, so training
    stalls. `nll_loss` on probabilities minimises `-p[y]` instead of
    `-log p[y]`: a different, badly scaled objective. `binary_cross_entropy`
    on a sigmoid takes `log(sigmoid(z))`, which PyTorch clamps at -100 once
    the sigmoid rounds to 0 or 1 (|z| > 17 in float32): the loss saturates
    and the gradient of a confidently wrong sample is 0; under autocast it
    raises an error. The `..._with_logits` loss computes the same value
    stably from the logits.

    ## Example
    ```python
    loss = F.cross_entropy(F.softmax(logits, dim=1), labels)
    self.criterion = nn.BCELoss()                      # in __init__
    loss = self.criterion(torch.sigmoid(self.head(x)), y)
    ```

    ## Use instead
    ```python
    loss = F.cross_entropy(logits, labels)
    self.criterion = nn.BCEWithLogitsLoss()
    loss = self.criterion(self.head(x), y)
    ```

    ## Fix safety
    Every argument of the loss (`weight`, `ignore_index`, `reduction`,
    `label_smoothing`) and of the activation (`dim`, `dtype`) is kept.

    - BCE -> BCE with logits: safe. The values equal the original's on
      ordinary inputs and are exact where the original clamped. A loss module
      built elsewhere is rewritten only when this is its one use; otherwise
      the finding has no fix.
    - cross_entropy / nll_loss: the loss value changes on every input; that
      is the point (the original computes a different, wrong quantity). When
      the model's outputs are untouched (the softmax is inline, or stored in
      a name whose input is written at the loss instead, or stored in a name
      that only the loss reads) the fix is applied by `--fix` and labelled
      `numerics`.
    - unsafe: when the softmax/sigmoid result is stored in a name that is
      also read elsewhere (typically returned from `forward` next to the
      loss) and its input cannot be written at the loss (it is a call such as
      `self.fc(x)`), the fix removes the activation from the assignment, which
      changes what those other readers, and the model's callers, receive.

    No fix when the activation ends a model's `forward` or a layer stack:
    removing it changes what the model returns to every caller (predictions,
    metrics, exported graphs); drop the activation from `forward` (apply it
    where probabilities are needed) or use the loss that takes them.

    Not detected: models built by factories of other libraries, modules kept
    in containers (`self.heads[i]`), `nn.Sequential(*layers)` built from a
    list, a `forward` whose returns disagree (`logits` in training, a softmax
    in eval is correct), activations stored in attributes, and the input
    of a loss module of the project whose `forward` passes it on to
    `binary_cross_entropy_with_logits` (a focal loss handed a model's
    sigmoid output).
    """

    code = "TL206"
    name = "activation-before-loss"
    message = "softmax/sigmoid fed to a loss that applies its own (cross_entropy, BCE) or needs log-probabilities (nll_loss)"
    fix_applicability = Applicability.UNSAFE
    confidence_levels = """
- **high**: a softmax fed to `cross_entropy` / `nll_loss` (or any activation fed to a `..._with_logits`
  loss) written at the loss or a few lines before it, or ending the `forward` of the model (or the
  `nn.Sequential`) whose output the loss receives, found in the same file or the project; a sigmoid fed
  to `binary_cross_entropy` in a project that runs in float16 (autocast makes it raise).
- **medium**: a sigmoid fed to `binary_cross_entropy` elsewhere: the loss is right until the sigmoid
  saturates, which ordinary training reaches only now and then; and the model reaches the loss through a
  parameter of a function (`train(model, loader)`), every call of which in the file passes a model that
  ends in the activation (other modules may call it with other models).
- **low**: both of the last two.
"""
    triggers = tuple(sorted(LOSS_NAMES))

    @classmethod
    def prepass(cls, scan):
        # The loss may be built elsewhere (``__init__``, module level) and reached by name; the activation may
        # end a model built in another region or module, or handed in by the callers of the loss's function.
        losses = scan.reachable_words(LOSS_NAMES)
        seeds = scan.regions_where(lambda region: not region.uses.isdisjoint(losses))
        if not seeds:
            return None
        functions = {
            scan.regions[i].node.name
            for i in seeds
            if isinstance(scan.regions[i].node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not framework_called(scan.regions[i].node.name)
        }
        seeds = seeds | scan.regions_mentioning(functions) if functions else seeds
        if not scan.mentions(ACTIVATION_WORDS) and not _imports_an_activation(scan) and not _imported_where_an_activation_is(scan):
            return None  # no activation is written here, and none comes from the project's modules
        return seeds

    def visit_Call(self, node: cst.Call) -> None:
        loss = match_loss(self.context, node) or self._loss_passed_by_callers(node)
        if loss is None or loss.kind not in WRONG_INPUTS or loss.input is None:
            return
        kinds = WRONG_INPUTS[loss.kind]
        activation = activation_of(self.context, loss.input.value, kinds=kinds)
        # A loss an option picks among branches: no validation draw has read one blind yet, so it stays at medium.
        unmeasured = loss.built == "branches"
        if activation is not None:
            confidence = self._confidence(loss, Confidence.HIGH)
            if unmeasured and confidence is Confidence.HIGH:
                confidence = Confidence.MEDIUM
            self.report(node, message=_message(loss.kind, activation.kind), fix=self._fix(loss, activation), confidence=confidence,
                        unmeasured=unmeasured)
            return
        traced = trace_output(self.context, loss.input.value)
        if traced is None or traced.kind not in kinds:
            return
        message = f"{_message(loss.kind, traced.kind)} (the input is the output of {traced.origin}, which ends in {traced.kind})"
        confidence = self._confidence(loss, Confidence.MEDIUM if traced.assumed else Confidence.HIGH)
        if unmeasured and confidence is Confidence.HIGH:
            confidence = Confidence.MEDIUM
        self.report(node, message=message, confidence=confidence, unmeasured=unmeasured)

    def _loss_passed_by_callers(self, node: cst.Call) -> Optional[LossCall]:
        """``loss_fn(preds, targets)`` with ``loss_fn`` a parameter every caller passes a loss module of one class."""
        if not isinstance(node.func, cst.Name) or has_star_args(node):
            return None
        constructor = constructor_passed_by_callers(self.context, node.func.value)
        if constructor is None:
            return None
        kind = LOSS_MODULES.get(self.context.qualified_name(unmoved(constructor).func) or "")
        if kind is None:
            return None
        return LossCall(kind, "module", node, argument(node, 0, "input"), argument(node, 1, "target"), constructor, "param", node.func.value)

    def _confidence(self, loss: LossCall, found: Confidence) -> Confidence:
        """A softmax into cross_entropy or nll_loss computes a wrong loss on every input: as sure as the
        activation is found.  BCE on a sigmoid is right until the sigmoid saturates (|x| > ~17), which ordinary
        training reaches only now and then (a confident GAN discriminator): ``medium``; under float16 autocast
        ``binary_cross_entropy`` raises, so a project that runs in float16 makes it as sure as the activation."""
        if loss.kind != "bce" or project_uses_float16(self.context):
            return found
        return Confidence.MEDIUM if found is Confidence.HIGH else Confidence.LOW

    def _fix(self, loss: LossCall, activation):
        rewrite = rewrite_activation(self.context, activation, "log_softmax" if loss.kind == "nll" else "input")
        if rewrite is None:
            return None
        replacements, imports = rewrite.replacements, rewrite.imports
        if loss.kind == "bce":
            swapped = with_logits_replacements(self.context, loss)
            if swapped is None:
                return None
            replacements, imports = replacements + swapped[0], imports + swapped[1]
            applicability = Applicability.SAFE
        else:
            applicability = Applicability.NUMERICS
        if rewrite.changes_other_uses:
            applicability = Applicability.UNSAFE
        return FixSpec(applicability, FIX_MESSAGES[loss.kind], replacements, tuple(dict.fromkeys(imports)))


_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def _imported_where_an_activation_is(scan) -> bool:
    """Whether a project module that names this file's module writes an activation's name: its calls may hand this
    file's functions an activation's output (analysis/project/project_calls.py)."""
    project = active_project()
    module = project.module_of(scan.path) if project is not None else None
    if module is None:
        return False

    def compute() -> frozenset:
        """The words of the project's modules that write an activation's name (read once per run)."""
        words = tuple(word.encode() for word in ACTIVATION_WORDS)
        found: set = set()
        for other, text in project.every_file_text():
            if other is not None and any(word in text for word in words):
                found.update(_WORD.findall(text))
        return frozenset(found)

    return module.rpartition(".")[2].encode("utf-8") in project.fact("tl206.words-beside-activations", compute)


def _imports_an_activation(scan) -> bool:
    """Whether a project module this file imports a called or subclassed name from (a model class, a builder,
    an instance), or imports whole or with ``*``, reaches an activation's name in its text or its imports' texts: another
    module's activation reaches the file's code only through one of those."""
    project = active_project()
    if project is None:
        return False
    used = set()
    for region in scan.regions:
        used |= region.calls
    for statement in scan.tree.body:
        if isinstance(statement, ast.ClassDef):
            used.update(ast_dotted_name(base).rsplit(".", 1)[-1] for base in statement.bases if ast_dotted_name(base))
    facts = facts_of_tree(scan.tree, scan.path)
    for statement in scan.import_statements:
        if isinstance(statement, ast.Import):  # ``import pkg.models``: its classes are reached as ``pkg.models.Net``
            facts.imports.update((alias.name, alias.name) for alias in statement.names if "." in alias.name and not alias.asname)
    words = tuple(word.encode() for word in ACTIVATION_WORDS)
    for qualified in set(facts.imports.values()):
        module = qualified if project.is_module(qualified) else qualified.rpartition(".")[0]
        called = qualified.rsplit(".", 1)[-1] in used or module == qualified
        if called and project.is_module(module) and project.reaches_words(module, words):
            return True  # read from the text alone: the rule parses the module if its analysis gets there
    # ``from models import *`` binds every public name of the module: its classes are reached as if imported
    return any(project.is_module(module) and project.reaches_words(module, words) for module in facts.star_modules)


def _message(loss_kind: str, activation_kind: str) -> str:
    return MESSAGES[loss_kind].format(kind=activation_kind)
