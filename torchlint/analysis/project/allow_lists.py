"""Allow-lists for weights-only loading: where the code lets ``torch.load`` unpickle more types.

``torch.serialization.add_safe_globals([...])`` widens the weights-only allow-list for the whole process;
``with torch.serialization.safe_globals([...]):`` for its block.  A load in a file that calls either, or in a
program where another module calls ``add_safe_globals`` (the modules that run in one process with it:
``ProjectIndex.program_of``, its importers and what they import), may load the types named there: TL406
stays silent on it rather than guess which types the list names.  Calls are read as code, through the
module's imports; a comment or a string naming them is no evidence.  A module outside the program (another
script of the repository) allow-lists nothing for this one.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, FrozenSet, Optional

from torchlint.analysis.model.ast_names import ast_dotted_name, every_node
from torchlint.analysis.model.checkpoints import ALLOW_LISTS
from torchlint.analysis.model.project_index import file_facts

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# Calls whose allow-list holds for the rest of the process.
PROCESS_WIDE: FrozenSet[str] = frozenset({"torch.serialization.add_safe_globals"})


def _calls_one_of(tree: ast.AST, imported, names: FrozenSet[str]) -> bool:
    return any(isinstance(node, ast.Call) and imported(ast_dotted_name(node.func)) in names for node in every_node(tree))


def allow_lists_in_file(context: "FileContext") -> bool:
    """Whether the file of ``context`` calls ``add_safe_globals`` or ``safe_globals``."""
    if "safe_globals" not in context.source:
        return False
    facts = file_facts(context)
    return facts is not None and _calls_one_of(facts.tree, facts.imported, ALLOW_LISTS)


def allow_lists_in_program(context: "FileContext") -> bool:
    """Whether another module of the program of ``context``'s file calls ``add_safe_globals`` (each module is
    read once per run, and only when its text names the call)."""
    project = context.project
    if project is None or context.path in ("-", ""):
        return False
    module: Optional[str] = project.module_of(context.path)
    if module is None:
        return False
    for name in sorted(project.program_of(module) - {module}):

        def compute(name: str = name) -> bool:
            if b"add_safe_globals" not in project.module_bytes(name):
                return False
            facts = project.module_facts(name)
            return facts is not None and _calls_one_of(facts.tree, facts.imported, PROCESS_WIDE)

        if project.fact(f"allow-lists:{name}", compute):
            return True
    return False
