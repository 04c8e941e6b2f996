from __future__ import annotations

import re

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis.api.api_drift import PRETRAINED_DEPRECATED_SINCE, effective_target
from torchlint.analysis.model.calls import keyword_arg, positional_args
from torchlint.analysis.api.drift_fixes import api_reference
from torchlint.analysis.model.calls import literal_bool
from torchlint.analysis.api.torchvision_builders import LegacyWeights, builder_chosen_by_name, legacy_keywords
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.rule import Applicability, FixSpec, ImportRequirement, Replacement, Rule



# A builder picked by a computed name: ``getattr(torchvision.models, name)(...)``, ``models.__dict__[arch](...)``.
_BY_NAME = re.compile(r"\bgetattr\s*\(|\b__dict__\s*\[")
_LEGACY_KEYWORD = re.compile(r"\bpretrained\b")

class TorchvisionPretrainedArgument(Rule):
    """
    ## What it does
    Flags `pretrained=` and `pretrained_backbone=` (or a positional first
    argument) in calls of torchvision's model builders:
    `torchvision.models.resnet50(pretrained=True)`,
    `models.detection.fasterrcnn_resnet50_fpn(pretrained_backbone=False)`,
    also of a builder the code picks by name from a model namespace
    (`getattr(torchvision.models, name)(pretrained=...)`,
    `models.__dict__[arch](pretrained=True)`): every builder there takes
    the flag. Which builders take them and what they mean comes from a table
    generated from torchvision's own sources
    (`tools/gen_torchvision_weights.py`, torchvision 0.28).

    ## Why is this bad?
    torchvision 0.13 (paired with torch 1.12) replaced these flags by
    `weights=` / `weights_backbone=`; every call with them warns, and
    torchvision says they may be removed. `pretrained=True` also hides which
    weights are loaded: it means the builder's oldest ImageNet weights
    (`ResNet50_Weights.IMAGENET1K_V1`), while `.DEFAULT` is the best ones
    available (`IMAGENET1K_V2`, other numbers). For a few builders
    (`vit_h_14`, `regnet_y_128gf`) `pretrained=True` raises ValueError:
    there are no such weights.

    ## Example
    ```python
    from torchvision import models

    backbone = models.resnet50(pretrained=True)
    detector = models.detection.fasterrcnn_resnet50_fpn(pretrained=False, pretrained_backbone=use_imagenet)
    ```

    ## Use instead
    ```python
    backbone = models.resnet50(weights=models.ResNet50_Weights.IMAGENET1K_V1)
    detector = models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=models.ResNet50_Weights.IMAGENET1K_V1 if use_imagenet else None
    )
    ```

    ## Fix safety
    Safe: the fix writes the weights the legacy flag loads, never
    `.DEFAULT` (which may be other weights and change the model's
    predictions): `True` becomes the builder's legacy member, `False`
    becomes `None`, and any other expression `e` becomes
    `<member> if e else None` (torchvision tests the flag's truth). For the
    quantized builders the member depends on `quantize=`, which must then
    be a literal. No fix where the builder has no weights for `True`, where
    its meaning depends on code the table does not follow (the backbone
    helpers of `detection.backbone_utils`), or where the call already
    passes the new keyword. The enum is named through the file's imports
    (`models.ResNet50_Weights` after `from torchvision import models`),
    adding `import torchvision` when nothing names it.
    """

    code = "TL604"
    name = "torchvision-pretrained-argument"
    message = "`pretrained=` is deprecated in torchvision's model builders: it warns on every call and hides which weights load"
    fix_applicability = Applicability.SAFE
    triggers = ("pretrained",)

    @classmethod
    def prepass(cls, scan):
        known = scan.regions_where(lambda region: any(legacy_keywords(name) for name in region.qualified_calls))
        by_name = scan.regions_whose_text_matches(_BY_NAME) & scan.regions_whose_text_matches(_LEGACY_KEYWORD)
        return (known | by_name) or None

    def visit_Call(self, node: cst.Call) -> None:
        meanings = legacy_keywords(self.context.qualified_name(node.func)) or self._chosen_by_name(node.func)
        if not meanings or effective_target(self.context.settings.target_torch_version) < PRETRAINED_DEPRECATED_SINCE:
            return
        if is_version_guarded(self.context):
            return
        for legacy, meaning in meanings.items():
            given = keyword_arg(node, legacy)
            if given is None and legacy == "pretrained" and positional_args(node):
                given = positional_args(node)[0]  # torchvision maps a positional first argument to the legacy flag
            if given is not None:
                self._report(node, given, meaning)

    def _chosen_by_name(self, func: cst.BaseExpression):
        """``getattr(torchvision.models, name)`` and ``models.__dict__[name]``: a builder the code picks by name."""
        namespace = name = None
        if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr" and len(func.args) == 2:
            namespace, chosen = self.context.qualified_name(func.args[0].value), func.args[1].value
        elif (
            isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute) and func.value.attr.value == "__dict__"
            and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index)
        ):
            namespace, chosen = self.context.qualified_name(func.value.value), func.slice[0].slice.value
        else:
            return {}
        if isinstance(chosen, cst.SimpleString) and isinstance(chosen.evaluated_value, str):
            name = chosen.evaluated_value
        return builder_chosen_by_name(namespace, name)

    def _report(self, call: cst.Call, given: cst.Arg, meaning: LegacyWeights) -> None:
        member, why = self._member_text(call, meaning)
        if meaning.no_weights and literal_bool(given.value) is not False:
            message = f"`{meaning.legacy_keyword}=True` raises ValueError for this builder: torchvision has no such weights"
        else:
            flag = literal_bool(given.value)
            if flag is False:
                loads = f"; `{meaning.new_keyword}=None` builds the same untrained model"
            elif flag is True and member:
                loads = f"; `{meaning.new_keyword}={member[0]}` loads the same weights"
            elif member:
                loads = f"; `{meaning.new_keyword}={member[0]}` loads the same weights when it is true"
            else:
                loads = ""
            message = f"`{meaning.legacy_keyword}=` is deprecated since torchvision 0.13 (it warns on every call){loads}"
            if why and flag is not False:
                message += f" ({why})"
        self.report(given, message, self._fix(call, given, meaning, member))

    def _member_text(self, call: cst.Call, meaning: LegacyWeights) -> Tuple[Optional[Tuple[str, Tuple[ImportRequirement, ...]]], str]:
        """(the member for a true flag as source text with its imports, or None; why there is none)."""
        qualified = meaning.member
        if meaning.chosen_by is not None:
            chooser = keyword_arg(call, meaning.chosen_by)
            choice = literal_bool(chooser.value) if chooser is not None else False
            if choice is None:
                return None, f"the weights depend on `{meaning.chosen_by}=`"
            qualified = meaning.if_true if choice else meaning.if_false
        if meaning.dynamic:
            return None, "the weights depend on the backbone chosen"
        if qualified is None:
            return None, ""
        enum, _, member = qualified.rpartition(".")
        found = api_reference(self.context, enum)
        if found is None:
            return None, "`torchvision` is bound to something else here"
        return (f"{found[0]}.{member}", found[1]), ""

    def _fix(self, call: cst.Call, given: cst.Arg, meaning: LegacyWeights, member) -> Optional[FixSpec]:
        if keyword_arg(call, meaning.new_keyword) is not None:
            return None
        flag = literal_bool(given.value)
        imports: Tuple[ImportRequirement, ...] = ()
        if flag is False:
            value: cst.BaseExpression = cst.Name("None")
        elif member is None:
            return None
        elif flag is True:
            value, imports = cst.parse_expression(member[0]), member[1]
        else:
            test = given.value
            if isinstance(test, (cst.IfExp, cst.Lambda, cst.NamedExpr)) and not test.lpar:
                test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])  # binds looser than `if`
            value = cst.IfExp(test=test, body=cst.parse_expression(member[0]), orelse=cst.Name("None"))
            imports = member[1]
        if given.keyword is None:
            if len(positional_args(call)) > 1:
                return None  # a keyword cannot stand before the positional arguments that follow it
            rendered = f"{meaning.new_keyword}={self.context.code(value)}"
            return FixSpec(Applicability.SAFE, f"Use `{meaning.new_keyword}=`", (Replacement(given.value, rendered),), imports)
        replacements = (Replacement(given.keyword, cst.Name(meaning.new_keyword)), Replacement(given.value, value))
        return FixSpec(Applicability.SAFE, f"Use `{meaning.new_keyword}=`", replacements, imports)
