"""Keyword names of torch's built-in functions, which ``inspect.signature`` cannot read.

Shared by ``gen_signatures.py`` (TL405's table) and ``gen_api_table.py`` (the table of releases):
the parameters of the signatures a docstring documents, and the arguments of the ATen schemas.
Imports nothing of torchlint, so that it runs inside a scratch environment of any torch release.
"""
from __future__ import annotations

import re
from typing import List, Set

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def split_top_level(text: str) -> List[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def documented_keywords(name: str, doc: str, module_prefix: bool = False) -> Set[str]:
    """Parameter names of every ``name(...)`` signature documented at a line start; with
    ``module_prefix``, also of ``linalg.name(...)`` and other dotted spellings."""
    prefix = r"(?:[\w.]+\.)?" if module_prefix else ""
    names: Set[str] = set()
    for match in re.finditer(rf"(?m)^\s*{prefix}{re.escape(name)}\(", doc):
        depth, index, start = 1, match.end(), match.end()
        while index < len(doc) and depth:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(doc[index], 0)
            index += 1
        for part in split_top_level(doc[start : index - 1]):
            part = part.strip().lstrip("\\").strip()
            if part.startswith("*"):
                continue  # '*' or '*size'
            identifier = IDENTIFIER.match(part)
            if identifier:
                names.add(identifier.group(0))
    return names


def schema_keywords(operator: str, is_method: bool = False) -> Set[str]:
    """Argument names of the ATen schemas of ``operator``: ``self`` is ``input`` in a function, and a
    method's receiver and ``out=`` are not keywords of the method."""
    import torch

    names: Set[str] = set()
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{operator}"):
        for argument in schema.arguments:
            if argument.name == "self":
                if not is_method:
                    names.add("input")
            elif not (is_method and argument.name == "out"):
                names.add(argument.name)
    return names
