"""Rendering a node as it stands in its file, and the positions of one statement's nodes: the only
place torchlint uses LibCST's private code generator.

LibCST's public ``Module.code_for_node`` renders a node as if it stood at the top level, and its
``PositionProvider`` needs a ``MetadataWrapper`` over the whole module (which costs more than the
parse). Both questions are answered here by running the node's own code generator with the
indentation of its blocks. The private names this needs are pinned by the libcst range in
``pyproject.toml``; ``tests/test_libcst_internals.py`` fails when an installed release outside it
changes them.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodeRange, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

# The releases whose private code generator the two functions below were checked against.
TESTED_LIBCST = ((1, 1), (1, 9))


def render(node: cst.CSTNode, module: cst.Module, indents: Sequence[str] = ()) -> str:
    """Source text of ``node`` inside blocks indented by ``indents`` (continuation lines included)."""
    state = CodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline, indent_tokens=list(indents)
    )
    node._codegen(state)
    return "".join(state.tokens)


def statement_positions(
    statement: cst.CSTNode, module: cst.Module, indents: Sequence[str]
) -> Tuple[str, Dict[cst.CSTNode, CodeRange]]:
    """The text of ``statement`` inside blocks indented by ``indents``, and the positions of its nodes
    counted from the statement's own first line."""
    provider = PositionProvider()
    state = PositionProvidingCodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        provider=provider,
        indent_tokens=list(indents),
    )
    statement._codegen(state)
    # The module's codegen drops its very last token when the file lacks a final newline.
    return "".join(state.tokens[:-1]), provider._computed
