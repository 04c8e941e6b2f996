"""Rule discovery and rule selectors.

Every ``Rule`` subclass defined in a module under ``torchlint/rules/`` is a
rule: there is no hand-kept list.  Selectors name rules by code (``TL201``),
code prefix (``TL2``, ``TL``), kebab-case name (``log-of-softmax``) or ``ALL``.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import pkgutil
from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, Iterator, List, Optional, Tuple, Type

from torchlint.rule import Rule


class UnknownSelector(ValueError):
    def __init__(self, selector: str, suggestion: Optional[str] = None) -> None:
        hint = f"; did you mean `{suggestion}`?" if suggestion else ""
        super().__init__(
            f"unknown rule selector {selector!r}{hint} (expected a code such as TL201, a prefix such as TL2, a rule name, or ALL)"
        )
        self.selector = selector
        self.suggestion = suggestion


@lru_cache(maxsize=None)
def all_rules() -> Dict[str, Type[Rule]]:
    """Code -> rule class, sorted by code."""
    import torchlint.rules as package

    found: Dict[str, Type[Rule]] = {}
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
                and "code" in vars(value)
            ):
                value.validate_metadata()
                if value.code in found and found[value.code] is not value:
                    raise TypeError(f"two rules claim {value.code}: {found[value.code].__qualname__} and {value.__qualname__}")
                found[value.code] = value
    return dict(sorted(found.items()))


# What selectors need of the rules, code -> (name, enabled by default).  A warm cached run resolves its
# selection from a snapshot of it (torchlint/cache.py keeps one per version of the package's code) and never
# imports the rules, which it does not run.
_snapshot: Optional[Dict[str, Tuple[str, bool]]] = None


def catalog() -> Dict[str, Tuple[str, bool]]:
    """Code -> (name, enabled by default) of every rule, sorted by code."""
    if _snapshot is not None:
        return _snapshot
    return {code: (rule.name, rule.default_enabled) for code, rule in all_rules().items()}


@contextlib.contextmanager
def catalog_snapshot(snapshot: Optional[Dict[str, Tuple[str, bool]]]) -> Iterator[None]:
    """Within the block, selectors resolve against ``snapshot`` (None: against the rules themselves)."""
    global _snapshot
    previous, _snapshot = _snapshot, snapshot
    try:
        yield
    finally:
        _snapshot = previous


def rule_by_code_or_name(key: str) -> Type[Rule]:
    rules = all_rules()
    if key.upper() in rules:
        return rules[key.upper()]
    for rule in rules.values():
        if rule.name == key:
            return rule
    raise UnknownSelector(key, closest_selector(key))


def expand_selector(selector: str) -> FrozenSet[str]:
    selector = selector.strip()
    rules = catalog()
    if selector == "ALL":
        return frozenset(rules)
    upper = selector.upper()
    if upper.startswith("TL"):
        matched = frozenset(code for code in rules if code.startswith(upper))
        if matched:
            return matched
    for code, (name, _) in rules.items():
        if name == selector:
            return frozenset({code})
    raise UnknownSelector(selector, closest_selector(selector))


def closest_selector(selector: str) -> Optional[str]:
    """The code or name ``selector`` is most likely a typo of (None when nothing is close, or two codes are equally so).

    A code must be one character off (``TL2011``) and closer than any other code: codes differ in a digit or two,
    so looser matches are guesses.  A name may be further off (``log-of-softmx``, ``unguarded_sqrt``).
    """
    rules = catalog()
    text = selector.strip()
    if text.upper().startswith("TL"):
        codes = difflib.get_close_matches(text.upper(), list(rules), n=2, cutoff=0.8)
        if len(codes) == 1 or (codes and _similarity(text.upper(), codes[0]) > _similarity(text.upper(), codes[1])):
            return codes[0]
    names = difflib.get_close_matches(text.lower().replace("_", "-"), [name for name, _ in rules.values()], n=1)
    return names[0] if names else None


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def expand_selectors(selectors: Iterable[str]) -> FrozenSet[str]:
    codes: set = set()
    for selector in selectors:
        codes |= expand_selector(selector)
    return frozenset(codes)


def default_codes() -> FrozenSet[str]:
    return frozenset(code for code, (_, enabled) in catalog().items() if enabled)


def rules_for_codes(codes: Iterable[str]) -> List[Type[Rule]]:
    rules = all_rules()
    return [rules[code] for code in sorted(codes)]

