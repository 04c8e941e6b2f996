"""Whether a project turns its models into graphs: TorchScript, tracing, ONNX export, ``torch.compile``.

Code that builds tensors element by element from Python values (``torch.tensor(range(n))``) or tests
membership in a tensor (``True in mask``) runs correctly in eager mode, only slower; traced, scripted or
exported, the first is frozen into the graph as a constant and the second does not compile.  The style
rules are sure of their claim only in a project that does one of these (read from its text, once per run).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from torchlint.analysis.model.project_index import mentioned_in_project

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

_GRAPH_CAPTURE = re.compile(
    rb"jit\.(trace|script|trace_module)\b|onnx\.export|torch\.compile\(|torch\.export\.|_dynamo|torch\.fx\.|symbolic_trace"
)


def captures_graphs(context: "FileContext") -> bool:
    """The file or a module of its project traces, scripts, exports or compiles a model."""
    return mentioned_in_project(context, "tracing.captures-graphs", _GRAPH_CAPTURE)
