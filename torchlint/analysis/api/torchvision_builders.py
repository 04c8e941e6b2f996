"""What torchvision's deprecated ``pretrained=`` / ``pretrained_backbone=`` mean, per model builder.

The table (``torchlint/data/torchvision_weights.json``) is generated from torchvision's sources by
``tools/gen_torchvision_weights.py``: each builder's ``@handle_legacy_interface`` decorator says
which weights ``pretrained=True`` loads.  That is the builder's *legacy* member
(``ResNet50_Weights.IMAGENET1K_V1``), not ``.DEFAULT`` (for resnet50 ``IMAGENET1K_V2``, other
weights): only the legacy member keeps what the program loads.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional


@dataclass(frozen=True)
class LegacyWeights:
    """What ``<legacy keyword>=True`` of one builder means."""

    legacy_keyword: str  # "pretrained" / "pretrained_backbone"
    new_keyword: str  # "weights" / "weights_backbone"
    # The enum member loaded (qualified, e.g. torchvision.models.ResNet50_Weights.IMAGENET1K_V1); None with
    # ``no_weights`` (the builder has none: True raises ValueError) or when ``chosen_by`` decides.
    member: Optional[str] = None
    no_weights: bool = False
    # Another keyword of the call picks the member (quantization builders: ``quantize``).
    chosen_by: Optional[str] = None
    if_true: Optional[str] = None
    if_false: Optional[str] = None
    dynamic: bool = False  # decided by code the table does not follow


@lru_cache(maxsize=1)
def _table() -> Dict[str, Dict[str, LegacyWeights]]:
    from importlib import resources

    text = resources.files("torchlint").joinpath("data/torchvision_weights.json").read_text(encoding="utf-8")
    builders: Dict[str, Dict[str, LegacyWeights]] = {}
    for name, entry in json.loads(text)["builders"].items():
        builders[name] = {
            legacy: LegacyWeights(
                legacy_keyword=legacy,
                new_keyword=facts["replaced_by"],
                member=facts.get("member"),
                no_weights="member" in facts and facts["member"] is None,
                chosen_by=facts.get("chosen_by"),
                if_true=facts.get("if_true"),
                if_false=facts.get("if_false"),
                dynamic=bool(facts.get("dynamic")),
            )
            for legacy, facts in entry["legacy"].items()
        }
    return builders


def legacy_keywords(builder: Optional[str]) -> Dict[str, LegacyWeights]:
    """Legacy keyword -> its meaning, for the torchvision builder ``builder`` (qualified); empty if unknown."""
    if builder is None or not builder.startswith("torchvision."):
        return {}
    table = _table()
    found = table.get(builder)
    if found is not None:
        return found
    # A submodule that re-exports a builder (``torchvision.models.mobilenet`` star-imports ``mobilenetv2``):
    # builder names are unique within a model namespace, so the namespace's own entry is the same function.
    for namespace in sorted(MODEL_NAMESPACES, key=len, reverse=True):
        if builder.startswith(namespace + "."):
            return table.get(f"{namespace}.{builder.rsplit('.', 1)[1]}", {})
    return {}


# Namespaces whose functions are model builders that take the legacy weights keywords.
MODEL_NAMESPACES = frozenset(
    {
        "torchvision.models",
        "torchvision.models.detection",
        "torchvision.models.segmentation",
        "torchvision.models.video",
        "torchvision.models.quantization",
        "torchvision.models.optical_flow",
    }
)
# What ``pretrained=`` means for a builder chosen by a name the code computes: the weights depend on the builder.
_ANY_BUILDER = {"pretrained": LegacyWeights(legacy_keyword="pretrained", new_keyword="weights", dynamic=True)}


def builder_chosen_by_name(namespace: Optional[str], name: Optional[str]) -> Dict[str, LegacyWeights]:
    """The legacy keywords of the builder ``getattr(namespace, name)`` / ``namespace.__dict__[name]`` picks: the
    builder's own when ``name`` is a literal, else ``pretrained=`` of any builder of a model namespace."""
    if namespace not in MODEL_NAMESPACES:
        return {}
    return legacy_keywords(f"{namespace}.{name}") if name is not None else _ANY_BUILDER
