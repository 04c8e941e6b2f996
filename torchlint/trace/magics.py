"""IPython and Jupyter: ``%load_ext torchlint``, then

- ``%%torchlint_trace [--output-file F] [--stop-on-first]`` watches one cell;
- ``%torchlint_trace on`` watches every following cell, ``%torchlint_trace off`` stops.

A watched cell is a ``torchlint.watch()`` block (``inprocess``): the project of the working directory is
checked once, the cell's own numerics and fused-op findings are instrumented in its tree (an IPython AST
transformer), and the report is printed in the cell's output.  The cell's text is the Python IPython
runs (magics and shell escapes already turned into calls), so lines match the cell's traceback.
"""
from __future__ import annotations

import argparse
import ast
import os
import shlex
from typing import Any, Optional

from torchlint.trace.inprocess import Prepared, Watching, import_prelude, prepare, with_cell

MAGIC = "torchlint_trace"


def _cell_options(line: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"%%{MAGIC}", add_help=False)
    parser.add_argument("--output-file")
    parser.add_argument("--stop-on-first", action="store_true")
    return parser.parse_args(shlex.split(line))


class _CellTransformer(ast.NodeTransformer):
    """Instruments the next cell IPython compiles with the sites a watch planned for it."""

    def __init__(self) -> None:
        super().__init__()
        self.watching: Optional[Watching] = None
        self.name = ""
        self.text = ""

    def visit(self, node: ast.AST) -> ast.AST:
        watching, self.watching = self.watching, None
        if watching is not None and isinstance(node, ast.Module):
            watching.instrument(node, self.name, self.text)
        return node


class TraceMagics:
    """The magics of one IPython shell, and the state of ``%torchlint_trace on``."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.transformer = _CellTransformer()
        self.every_cell: Optional[Prepared] = None  # the project, checked once when `on` was run
        self.current: Optional[Watching] = None

    # -- one cell -------------------------------------------------------------------------------

    def cell(self, line: str, cell: str) -> Any:
        options = _cell_options(line)
        shell = self.shell
        text = shell.transform_cell(cell)
        name = shell.compile.cache(text, shell.execution_count, raw_code=cell)  # the cell's code name, its text in linecache
        prepared = with_cell(prepare(os.getcwd()), name, text, import_prelude(shell.user_ns))
        watching = Watching(output_file=options.output_file, stop_on_first=options.stop_on_first, prepared=prepared)
        tree = ast.parse(text, name)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        with watching:
            watching.instrument(tree, name, text)
            exec(compile(tree, name, "exec", dont_inherit=True), shell.user_ns)
            if last is not None:  # the value a cell ends with is its output, as IPython shows it
                expression = ast.Expression(last.value)
                ast.fix_missing_locations(expression)
                return eval(compile(expression, name, "eval", dont_inherit=True), shell.user_ns)
        return None

    # -- every cell -----------------------------------------------------------------------------

    def line(self, line: str) -> None:
        word = line.strip().lower()
        if word == "on":
            if self.every_cell is None:
                self.every_cell = prepare(os.getcwd())
                self.shell.events.register("pre_run_cell", self.pre_run_cell)
                self.shell.events.register("post_run_cell", self.post_run_cell)
                if self.transformer not in self.shell.ast_transformers:
                    self.shell.ast_transformers.append(self.transformer)
            print("torchlint: every following cell is watched (%torchlint_trace off to stop)")
        elif word == "off":
            if self.every_cell is not None:
                self.every_cell = None
                self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
                self.shell.events.unregister("post_run_cell", self.post_run_cell)
                if self.transformer in self.shell.ast_transformers:
                    self.shell.ast_transformers.remove(self.transformer)
            print("torchlint: cells are no longer watched")
        else:
            print(f"usage: %{MAGIC} on|off, or %%{MAGIC} [--output-file F] [--stop-on-first] as a cell's first line")

    def pre_run_cell(self, info: Any) -> None:
        raw = getattr(info, "raw_cell", "") or ""
        if self.every_cell is None or raw.lstrip().startswith((f"%{MAGIC}", f"%%{MAGIC}")):
            return
        shell = self.shell
        text = shell.transform_cell(raw)
        name = shell.compile.get_code_name(raw, text, shell.execution_count)
        watching = Watching(prepared=with_cell(self.every_cell, name, text, import_prelude(shell.user_ns)))
        watching.__enter__()
        self.current = watching
        self.transformer.watching, self.transformer.name, self.transformer.text = watching, name, text

    def post_run_cell(self, result: Any) -> None:
        watching, self.current = self.current, None
        self.transformer.watching = None
        if watching is not None:
            watching.__exit__(None, None, None)


def load(shell: Any) -> None:
    magics = TraceMagics(shell)
    shell.register_magic_function(magics.cell, "cell", MAGIC)
    shell.register_magic_function(magics.line, "line", MAGIC)
