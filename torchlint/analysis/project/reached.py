"""Code that nothing in the project runs: a function or a class that no module, script or notebook names.

A finding in such code cannot happen at run time as the project stands (readers of validation draws judged
31 of the 35 false API-drift findings at ``high`` on draws d1-d7 to sit in helpers no file calls: an unused
``init_params``, a ``weights_init`` no ``apply`` receives).  The fact is read from the project's text: the
name of each enclosing ``def`` or ``class`` appears nowhere else, comments left out.  Anything that may
reach it keeps it alive:

- a call, an attribute, an import under another name (``import f as g``), a string (a registry, a
  ``console_scripts`` entry, an argparse choice), another definition of the same name anywhere (which one a
  call reaches is not asked); a ``from m import f`` or an ``__all__`` entry alone uses nothing (readers of
  draw d12 judged 11 findings at ``high`` false in an ``init_params`` only ``__all__`` names and a loss class
  only an import names);
- a decorator (a registry, a command line, a test framework or a compiler calls it);
- a method: through its class (an override is called by its base class: ``reset_parameters``,
  ``training_step``), so a method is unreached when its class is; and when the project writes its name
  nowhere but in ``def`` lines, its class inherits from no class outside its file (no framework calls its hooks)
  and nothing looks an attribute up by a computed name (``getattr(obj, name)``);
- an import's module path names a file, not the function or class of the same name in it (``from
  models.ResNet import ResNet`` alone uses nothing);
- a lookup by a computed name: of a project module (``module.__dict__[name]``, ``getattr(module, name)``,
  ``vars(module)``): that module's definitions and its submodules' are taken as reached; of any module
  (``globals()[name]``, ``import_module``, ``eval``, a module imported relatively): every definition is;
- a top-level function that Python or pytest calls by its name (module ``__getattr__``, ``test_*``).

Code in a branch that literals turn off (``if False:``, ``while 0:``, the ``else`` of ``if True:``:
analysis/model/constant_branches.py) is unreached wherever it sits; so is a top-level ``def`` or ``class`` that a later
one of the same name replaces before any statement names it. A name bound to a literal (``is_load = False``) is a
switch the user edits, not dead code: such a branch keeps its findings.

A file whose top level imports, on no condition, what cannot be imported from it (a module its package lacks, a
package that lives only in a sibling folder of a script nothing puts on the path, a name the module beside it does
not define, a project module Python 3.7+ does not compile: ``x.cuda(async=True)``) runs nothing after that import:
its definitions and its top-level code are unreached. A notebook run from the top stops at such an import too:
what comes after it is unreached, what comes before it runs. A file that does not compile runs and uses nothing; only the
findings that name its syntax error stay where the rule put them (they break every run that imports or runs it).

Only code of a program the project shows is judged: a file that another module imports, that runs code at its
top level (a script: a ``__main__`` block, a call), or a notebook.  A module of definitions that no file imports
or names is unreached as a whole when the project's modules import one another (a vendored optimizer nothing
constructs); in a folder of files that import none of each other (excerpts, as pasted in bug reports) it may be
called from code that is not there, and is not judged.  Without a project (a
text linted on its own) nothing is known to be unreached.  The fact shows a finding at `low`
(rule.py): the code can still be called by a user of the project, so it is shown, not dropped
(on validation draws d19-d26, 2 of 56 such findings the rules found at `high` were read real).
"""
from __future__ import annotations

import ast
import os
import re
import threading
from collections import Counter
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.model.constant_branches import in_branch_never_taken
from torchlint.analysis.model.project_index import ProjectIndex, declared_all, notebook_code

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

NOTEBOOK_SUFFIX = ".ipynb"
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# A comment: ``#`` to the end of the line.  A ``#`` inside a string cuts the rest of its line too (a mention
# there is lost: the finding moves down one level at most); read this way the project's text costs a twentieth.
_COMMENT = re.compile(rb"#[^\n]*")
# Lookups of a definition by a computed name. In the file's own namespace (``globals()``, ``eval``, ``exec``,
# ``sys.modules[__name__]``, ``vars()``/``locals()``): its own definitions. Of the submodules of its own package
# (``import_module("." + name, package=__name__)``): theirs, or only the names their ``__all__`` exports when that
# is what the file reads (``globals().update({k: getattr(m, k) for k in m.__all__})``). Of any module
# (``import_module(name)``, ``__import__``, ``runpy``, ``sys.modules[name]``): every definition.
_OWN_NAMESPACE = re.compile(
    rb"\bglobals\s*\(\s*\)|\bsys\.modules\s*\[\s*__name__\s*\]|(?<![\w.])(?:eval|exec)\s*\(|(?<![\w.])(?:vars|locals)\s*\(\s*\)"
)
_OWN_PACKAGE_IMPORT = re.compile(rb"\bimport_module\s*\(\s*(?:f?['\"]\.[^)]*|[^)]*\bpackage\s*=\s*__name__[^)]*)\)")
# Marks a module whose own namespace (not its submodules') is looked up, in _Words.looked_up; and a package whose
# submodules are imported by computed names (each of them runs, whatever else imports it).
_OWN = " (own namespace)"
_IMPORTED = " (submodules imported)"
_EXPORTS_READ = re.compile(rb"\.__all__\b|['\"]__all__['\"]")
_DYNAMIC = re.compile(rb"\bimport_module\s*\(|\b__import__\s*\(|\brunpy\b|\bsys\.modules\b")
# ``import_module("datasets." + name)``, ``import_module(f"models.{arch}")``: a submodule of the package the
# literal names.
_PREFIXED_IMPORT = re.compile(rb"\bimport_module\s*\(\s*f?['\"]([A-Za-z_][\w.]*)\.(?:['\"]\s*\+|\{)")
_BY_NAME_OF = (
    re.compile(rb"\bgetattr\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*(?![\s\"'])"),
    re.compile(rb"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\.__dict__\b"),
    re.compile(rb"\bvars\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)"),
)
# Top-level functions that Python or pytest calls by their name (module ``__getattr__``, ``test_*``, module
# ``setup``/``teardown``); a method lives as long as its class, so ``forward`` needs no entry here.
_CALLED_BY_NAME = re.compile(r"^(__\w+__|test_\w*|setup|teardown|setup_module|teardown_module)$")


def _code_text(data: bytes) -> bytes:
    return _COMMENT.sub(b"", data)


# Every triple-quoted string, scanned in order so that each closing quote pairs with its opening one.
_TRIPLE_QUOTED = re.compile(rb'("""|\'\'\')(.*?)\1', re.S)
_OPEN_EXPRESSION = frozenset(b"([{,=\\+-*/%|&<>")


def _without_quoted_blocks(code: bytes) -> bytes:
    """``code`` without its string statements (a docstring, or code an author turned off by quoting it): a
    triple-quoted string that starts a line, ends one, and follows no open expression. A name written only there
    is used by nothing that runs (d50: a beam search nothing builds but in a quoted-out call). Lines stay."""
    pieces = []
    last = 0
    for match in _TRIPLE_QUOTED.finditer(code):
        begin = match.start()
        while begin > 0 and code[begin - 1 : begin] in (b"r", b"R", b"b", b"B", b"u", b"U"):
            begin -= 1
        line_start = code.rfind(b"\n", 0, begin) + 1
        line_end = code.find(b"\n", match.end())
        line_end = len(code) if line_end < 0 else line_end
        before = code[:line_start].rstrip()
        if (
            code[line_start:begin].strip()
            or code[match.end():line_end].strip()
            or (before and before[-1] in _OPEN_EXPRESSION)
        ):
            continue  # a value: ``x = """..."""``, ``f(\n"""...""")``
        pieces.append(code[last:begin])
        pieces.append(b"\n" * code.count(b"\n", begin, match.end()))
        last = match.end()
    pieces.append(code[last:])
    return b"".join(pieces)


def _words_text(data: bytes) -> bytes:
    """The text whose words count as uses of a definition: code without comments, string statements and blocks
    that literals turn off."""
    return _without_literal_off_blocks(_without_quoted_blocks(_code_text(data)))


_LITERAL_TEST = re.compile(rb"\b(?:if|elif|while)[ \t(]+(?:not[ \t]+)?(?:False|True|None|0|1)[ \t)]*:")


def _without_literal_off_blocks(code: bytes) -> bytes:
    """``code`` with the blocks of ``if False:`` (``while 0:``, the ``else`` of ``if True:``) blanked: a name written
    only there is used by nothing that runs (d55: an optimizer built only under ``if False:``). Lines stay."""
    if not _LITERAL_TEST.search(code):
        return code
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return code
    lines = code.split(b"\n")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.While)) or not isinstance(node.test, (ast.Constant, ast.UnaryOp)):
            continue
        truth = _literal_truth(node.test)
        off = node.body if truth is False else node.orelse if truth is True and isinstance(node, ast.If) else []
        if off:
            for number in range(off[0].lineno - 1, off[-1].end_lineno):
                lines[number] = b""
    return b"\n".join(lines)


def _literal_truth(test: ast.expr) -> Optional[bool]:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _literal_truth(test.operand)
        return None if inner is None else not inner
    return bool(test.value) if isinstance(test, ast.Constant) else None


# Plumbing that names a definition without using it: the names a ``from ... import`` binds as they are (an
# ``as`` alias keeps both words: the alias is how it is used), the strings of ``__all__``, and module paths (an
# import statement's module names a file, never a function or class of that name: ``from models.ResNet import
# ResNet`` uses no ``ResNet``).
_FROM_IMPORT = re.compile(rb"^([ \t]*from[ \t]+)([\w.]+)([ \t]+import[ \t]+)(\([^)]*\)|[^\n]*(?:\\\n[^\n]*)*)", re.M)
_PLAIN_IMPORT = re.compile(rb"^([ \t]*import[ \t]+)([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)", re.M)
_EXPORTS = re.compile(rb"^[ \t]*__all__[ \t]*\+?=[ \t]*[\[(][^\])]*[\])]", re.M)
_IMPORTED_AS = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*[ \t]+as[ \t]+[A-Za-z_][A-Za-z0-9_]*")


def _kept_aliases(match: "re.Match[bytes]") -> bytes:
    return match.group(1) + match.group(3) + b" ".join(_IMPORTED_AS.findall(match.group(4)))


def _used_text(code: bytes) -> bytes:
    """Code without its plumbing: a definition that only imports and ``__all__`` name is used nowhere."""
    return _PLAIN_IMPORT.sub(lambda m: m.group(1), _FROM_IMPORT.sub(_kept_aliases, _EXPORTS.sub(b"", code)))


def _plumbing_words(code: bytes) -> Counter:
    """The words :func:`_used_text` leaves out of ``code`` (counted without rewriting the whole text)."""
    removed: Counter = Counter()
    for match in _EXPORTS.finditer(code):
        removed.update(_WORD.findall(match.group(0)))
    for match in _FROM_IMPORT.finditer(code):
        removed.update(_WORD.findall(match.group(2)))
        removed.update(_WORD.findall(match.group(4)))
        for kept in _IMPORTED_AS.findall(match.group(4)):
            removed.subtract(_WORD.findall(kept))
    for match in _PLAIN_IMPORT.finditer(code):
        removed.update(_WORD.findall(match.group(2)))
    return removed


def _imported_module(data: bytes, name: bytes) -> Optional[str]:
    """The module ``name`` is bound to by an import of ``data`` (``.`` first for a relative one), else None."""
    word = rb"(?<![\w.])%s(?![\w.])" % name
    match = re.search(rb"^\s*import\s+([\w.]+)\s+as\s+%s" % word, data, re.M)
    if match:
        return match.group(1).decode("ascii", "replace")
    match = re.search(rb"^\s*import\s+(?:[\w.]+\s*,\s*)*(%s)\b" % re.escape(name), data, re.M)
    if match:
        return name.decode("ascii", "replace")
    match = re.search(rb"^\s*from\s+(\.*[\w.]*)\s+import\s+[^\n]*%s" % word, data, re.M)
    if match:
        base = match.group(1).decode("ascii", "replace")
        return f"{base}.{name.decode('ascii', 'replace')}" if not base.endswith(".") else base + name.decode("ascii", "replace")
    return None


def _looked_up_by_name(
    data: bytes, index: ProjectIndex, module: Optional[str], path: Optional[str] = None
) -> "Optional[Tuple[set, set]]":
    """What ``data`` (the code of ``module``; None: a notebook) looks up definitions of by a computed name: (the
    project modules whose every definition it may reach, with their submodules: ``getattr(models, name)``,
    ``models.__dict__[arch]``, its own ``globals()``; the packages whose submodules it reaches only by the names
    their ``__all__`` exports). None when it may be any module's (``import_module(name)``, ``__import__``, a
    relative import's module, a notebook's own namespace)."""
    modules: set = set()
    exported: set = set()
    own_package = None
    if module is not None:
        own_package = module if index.module_path(module) and index.module_path(module).endswith("__init__.py") else module.rpartition(".")[0]
    if _OWN_PACKAGE_IMPORT.search(data):
        if not own_package:
            return None
        (exported if _EXPORTS_READ.search(data) else modules).add(own_package)
        data = _OWN_PACKAGE_IMPORT.sub(b"", data)
    for match in _PREFIXED_IMPORT.finditer(data):
        package = match.group(1).decode("utf-8", "replace")
        modules.add(f"{index.canonical(index.resolve_from(path, package)) if path else package}{_IMPORTED}")
    data = _PREFIXED_IMPORT.sub(b"", data)
    if _OWN_NAMESPACE.search(data):
        if module is None:
            return None
        modules.add(f"{module}{_OWN}")
        data = _OWN_NAMESPACE.sub(b"", data)
    if _DYNAMIC.search(data):
        return None
    for pattern in _BY_NAME_OF:
        for match in pattern.finditer(data):
            imported = _imported_module(data, match.group(1))
            if imported is not None and imported.startswith("."):
                return None
            if imported is not None and _is_project_module(index, imported):
                modules.add(imported)
    return modules, exported


def _is_project_module(index: ProjectIndex, module: str) -> bool:
    """``module`` or its package is one of the project's (an import names a module or a name in it)."""
    return index.is_module(module) or index.is_module(module.rpartition(".")[0])


class _Words:
    """How often each word occurs in the project's code (comments left out), and whether it looks anything
    up by a computed name."""

    def __init__(self, index: ProjectIndex) -> None:
        self.counts: Counter = Counter()
        # How often each name is defined by a ``def`` (methods included): a method named nowhere else is called nowhere.
        self.defined: Counter = Counter()
        # The same without imports and ``__all__``: uses of a function's or a class's name.
        self.uses: Counter = Counter()
        self.dynamic = False
        self.computed_attributes = False
        # Modules whose definitions (theirs and their submodules') a computed name may reach; packages whose
        # submodules it reaches only by the names their ``__all__`` exports.
        self.looked_up: set = set()
        self.exported_from: set = set()
        # Per file: its module's last name (None: a notebook), its words and whether it star-imports; per word,
        # the files that use it without defining it (a module or notebook with its own ``def f`` calls its own
        # ``f``, not another module's of the same name).
        self.index = index
        self.file_stems: list = []
        self.file_modules: list = []
        self.file_words: list = []
        self.star_importers: set = set()
        # Files with ``from . import f`` (a name of their own package, whose module name they do not write).
        self.package_importers: set = set()
        self.users: Dict[bytes, list] = {}
        self._seers: Dict[tuple, frozenset] = {}
        # Every file's code as it stands (for mentions of a module's path, which load it wherever they are).
        self.code_texts: list = []
        for module, data in index.every_file_text():
            code = _code_text(data)
            self.code_texts.append(code)
            code = _without_literal_off_blocks(_without_quoted_blocks(code))
            if module is not None and b"async" in data and not index.compiles(module):
                code = b""  # it raises SyntaxError when run or imported: it uses nothing
            words = Counter(_WORD.findall(code))
            number = len(self.file_words)
            self.file_stems.append(None if module is None else module.rpartition(".")[2].encode("utf-8"))
            self.file_modules.append(module)
            self.file_words.append(frozenset(words))
            if _STAR_IMPORT.search(code):
                self.star_importers.add(number)
            if _PACKAGE_IMPORT.search(code):
                self.package_importers.add(number)
            self.counts.update(words)
            self.defined.update(_ANY_DEF.findall(code))
            words.subtract(_plumbing_words(code))
            self.uses.update(words)
            defined = set(_DEFINED.findall(code))
            for word, count in words.items():
                if count > 0 and word not in defined:
                    self.users.setdefault(word, []).append(number)
            if not self.computed_attributes and _COMPUTED_ATTRIBUTE.search(code):
                self.computed_attributes = True
            if not self.dynamic:
                found = _looked_up_by_name(code, index, module, index.module_path(module) if module is not None else None)
                self.dynamic = found is None
                if found is not None:
                    self.looked_up |= found[0]
                    self.exported_from |= found[1]

    def used_where_seen(self, name: bytes, module: Optional[str]) -> bool:
        """Whether a file other than its definers uses ``name`` where ``module``'s own ``name`` can be meant: a
        file that imports the module (as Python resolves the import from that file: a script's own folder
        first), or one that imports a module which names both (a re-export, followed on); a notebook that names
        the module. A local variable ``train`` in a script that never imports ``engine`` calls no
        ``engine.train``, and ``utils.f`` in one program is not another program's ``utils.f``."""
        users = self.users.get(name)
        if not users:
            return False
        if module is None:
            return True
        key = (module, name)
        if key not in self._seers:
            self._seers[key] = self._seeing(module, name)
        seers = self._seers[key]
        return any(number in seers and self._may_mean(number, name, module) for number in users)

    def _may_mean(self, number: int, name: bytes, module: str) -> bool:
        """Whether file ``number``'s ``name`` can be ``module``'s: not when the file imports that name from a
        module that defines its own (``from lagrangian import Dynamics`` beside ``hamiltonian.Dynamics``)."""
        importer = self.file_modules[number]
        facts = self.index.module_facts(importer) if importer is not None else None
        bound = facts.imports.get(name.decode("utf-8", "replace")) if facts is not None else None
        if bound is None:
            return True
        found = self.index.locate(bound)
        if found is None:
            return True
        own = self.index.module_path(module)
        return own is None or os.path.abspath(found[0].path) == os.path.abspath(own)

    def _seeing(self, module: str, name: bytes) -> frozenset:
        seers: set = set()
        path = self.index.module_path(module)
        if path is None:
            return frozenset(self.package_importers)
        files, pending = {os.path.abspath(path)}, [(os.path.abspath(path), module.rpartition(".")[2].encode("utf-8"))]
        while pending:
            current, stem = pending.pop()
            for number, words in enumerate(self.file_words):
                if number in seers:
                    continue
                importer = self.file_modules[number]
                if importer is None:
                    if stem not in words:
                        continue  # a notebook imports by the names it writes
                elif current not in self.index.imported_files(importer):
                    continue
                seers.add(number)
                onward = self.index.module_path(importer) if importer is not None else None
                if onward is not None and os.path.abspath(onward) not in files and (name in words or number in self.star_importers):
                    files.add(os.path.abspath(onward))
                    pending.append((os.path.abspath(onward), importer.rpartition(".")[2].encode("utf-8")))
        return frozenset(seers | self.package_importers)

    def may_look_up(self, module: Optional[str]) -> bool:
        """Whether a definition of ``module`` may be reached by a computed name."""
        if self.dynamic:
            return True
        if module is None:
            return False
        if f"{module}{_OWN}" in self.looked_up or module in self.looked_up or self._imported_under_prefix(module):
            return True
        # A submodule is an attribute of its package only once something imports it (``models.__dict__[arch]``
        # does not reach a ``models/unused.py`` nothing imports).
        return any(module.startswith(m + ".") for m in self.looked_up) and self.index.is_imported(module)

    def imported_by_name(self, module: Optional[str]) -> bool:
        """Whether ``module`` is a submodule of a package that imports its submodules by computed names."""
        return module is not None and (
            any(module.startswith(package + ".") for package in self.exported_from) or self._imported_under_prefix(module)
        )

    def _imported_under_prefix(self, module: str) -> bool:
        """``import_module("datasets." + name)`` somewhere, and ``module`` is under ``datasets``."""
        return any(module.startswith(entry[: -len(_IMPORTED)] + ".") for entry in self.looked_up if entry.endswith(_IMPORTED))

    def exported_to_lookups(self, module: Optional[str], name: str) -> bool:
        """Whether the top-level ``name`` of ``module`` is in its ``__all__`` and its package's ``__init__``
        reaches its submodules' exports by computed names."""
        if module is None or not any(module.startswith(package + ".") for package in self.exported_from):
            return False
        facts = self.index.module_facts(module)
        exports = declared_all(facts) if facts is not None else None
        return exports is not None and name in exports


_STAR_IMPORT = re.compile(rb"\bimport[ \t]+\*")
_PACKAGE_IMPORT = re.compile(rb"(?m)^[ \t]*from[ \t]+\.+[ \t]+import\b")


def _words(index: ProjectIndex) -> _Words:
    return index.fact("reached.words", lambda: _Words(index))


def _mentions(data: bytes, name: bytes) -> int:
    return len(re.findall(rb"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % name, data))


# A top-level ``def``/``class`` (in a notebook's JSON, one that starts a source line's string): a method of the same
# name is no definition that would serve the module's own calls.
_DEFINED = re.compile(rb'(?m)^(?:[ \t]*")?(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)')


def _definitions(data: bytes, name: bytes) -> int:
    return len(re.findall(rb"\b(?:def|class)\s+%s(?![A-Za-z0-9_])" % name, data))


def unreached(context: "FileContext") -> bool:
    """Whether the code the context is at sits in a function or class that nothing in the project names, or in an
    annotation Python never evaluates."""
    if _in_unevaluated_annotation(context):
        return True
    index = context.project
    if in_branch_never_taken(context.ancestors):
        return True
    if index is None or context.path in ("", "-"):
        return False
    if not context.compiles:
        return True  # read with a stand-in for ``async=``: Python does not compile the file, no line of it runs
    if context.path.endswith(NOTEBOOK_SUFFIX) and _after_a_failing_notebook_import(context, index):
        return True
    owners = [node for node in context.ancestors if isinstance(node, (cst.FunctionDef, cst.ClassDef))]
    if not owners:
        # A script's own top level runs unless an import at its top (imports come first) raises; a module that
        # no part of the program imports or runs runs none of its top level either (its imports included).
        return context.memoized("reached.import-fails", context.module, lambda _: _imports_a_missing_module(context, index)) or (
            context.memoized("reached.module-never-runs", context.module, lambda _: _module_never_runs(context, index))
        )
    if context.memoized("reached.replaced", owners[0], lambda owner: _replaced_before_use(context.module, owner)):
        return True
    return context.memoized("reached.unreached", owners[-1], lambda _: _unreached(context, index, owners))


def _replaced_before_use(module: cst.Module, owner: cst.CSTNode) -> bool:
    """A top-level ``def``/``class`` that a later top-level one of the same name replaces, with no statement between
    them naming it: every use of the name, in this file or another, gets the later one."""
    body = module.body
    position = next((number for number, statement in enumerate(body) if statement is owner), None)
    if position is None:
        return False
    name = owner.name.value
    word = re.compile(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(name))
    for statement in body[position + 1 :]:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value == name:
            return not statement.decorators or not any(
                word.search(module.code_for_node(decorator)) for decorator in statement.decorators
            )
        if word.search(module.code_for_node(statement)):
            return False
    return False


def _module_never_runs(context: "FileContext", index: ProjectIndex) -> bool:
    """A module that runs nothing of its own when run (definitions and imports only, no ``__main__`` block) and
    that no part of the program reaches."""
    module = index.module_of(context.path)
    facts = index.module_facts(module) if module is not None else None
    if facts is None or any(_runs(statement, facts.qualify) for statement in facts.tree.body):
        return False  # run as a script, its top level runs, whoever imports it
    texts = context.memoized("reached.file", context.module, lambda _: _file_texts(context, index))
    if texts is not _DEAD_MODULE:
        return False
    words = _words(index)
    return not words.may_look_up(module) and not words.imported_by_name(module)


def _in_unevaluated_annotation(context: "FileContext") -> bool:
    """An annotation no run evaluates: a local variable's (``x: T = v`` in a function body), or any once the module
    postpones them (``from __future__ import annotations``); what it names is never looked up, let alone called."""
    ancestors = context.ancestors
    for position, node in enumerate(ancestors):
        if not isinstance(node, cst.Annotation):
            continue
        holder = ancestors[position - 1] if position else None
        if isinstance(holder, cst.AnnAssign) and any(isinstance(outer, cst.FunctionDef) for outer in ancestors[:position - 1]):
            return True
        return context.memoized("reached.postponed-annotations", context.module, lambda module: _postpones_annotations(module))
    return False


def _postpones_annotations(module: cst.Module) -> bool:
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.ImportFrom) and isinstance(small.module, cst.Name) and small.module.value == "__future__"
                and not isinstance(small.names, cst.ImportStar)
                and any(isinstance(alias.name, cst.Name) and alias.name.value == "annotations" for alias in small.names)
            ):
                return True
    return False


def _after_a_failing_notebook_import(context: "FileContext", index: ProjectIndex) -> bool:
    """A notebook run from the top stops at an import that cannot succeed from its folder (a module its package
    lacks, a package only another folder holds): nothing after that statement runs, definitions included."""
    failing = context.memoized("reached.notebook-failing-import", context.module, lambda _: _first_failing_import(context, index))
    if failing is None or len(context.ancestors) < 2:
        return False
    top = context.ancestors[1]
    position = next((number for number, statement in enumerate(context.module.body) if statement is top), None)
    return position is not None and position > failing


def _first_failing_import(context: "FileContext", index: ProjectIndex) -> Optional[int]:
    """The position in the notebook's code of its first unconditional import that :func:`_import_fails`."""
    for position, statement in enumerate(context.module.body):
        if not isinstance(statement, cst.SimpleStatementLine) or not any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
        ):
            continue
        try:
            tree = ast.parse(context.module.code_for_node(statement).strip())
        except (SyntaxError, ValueError):
            continue
        if _import_fails(context.path, tree, index):
            return position
    return None


def never_compiled(context: "FileContext") -> bool:
    """Whether no run of the project even compiles the file: nothing imports, runs or names it (a syntax error
    in it breaks every run that imports or runs it, whatever line it sits on or whichever import fails first)."""
    index = context.project
    if index is None or context.path in ("", "-"):
        return False

    def compute(_) -> bool:
        if index.is_shadowed(context.path):
            return True
        module = index.module_of(context.path)
        if (module is not None and index.is_imported(module)) or context.path.endswith(NOTEBOOK_SUFFIX):
            return False
        if _runs_at_top_level(context) and not _library_self_test(context, index, module):
            return False
        return _dead_module(context, index)

    return context.memoized("reached.never-compiled", context.module, compute)


def _unreached(context: "FileContext", index: ProjectIndex, owners) -> bool:
    # Per file, once: whether it is part of a program, and its code without comments (as edited, as on disk).
    texts = context.memoized("reached.file", context.module, lambda _: _file_texts(context, index))
    if texts is None:
        return False
    words = _words(index)
    if words.may_look_up(index.module_of(context.path)):
        return False
    if texts is _DEAD_MODULE and words.imported_by_name(index.module_of(context.path)):
        texts = _used_text(_words_text(context.source.encode("utf-8", "replace"))), _used_text(_words_text(_disk_text(context, index)))
    if texts is _DEAD_MODULE:
        return True
    source, on_disk = texts
    for position, node in enumerate(owners):
        if node.decorators:
            continue
        name = node.name.value
        parent = _owning_class(owners, position)
        if isinstance(node, cst.FunctionDef) and parent is not None:
            if _RUNNER_CALLED_METHODS.match(name) and _collected_by_a_test_runner(context, parent):
                continue  # a test method (or fixture) the runner calls by its name
            if _method_never_named(context, words, parent, name):
                return True
            continue  # else a method lives as long as its class
        if isinstance(node, cst.FunctionDef) and _CALLED_BY_NAME.match(name):
            continue  # a hook is called by its name
        if isinstance(node, cst.ClassDef) and _collected_by_a_test_runner(context, node):
            continue  # the runner finds the class itself
        encoded = name.encode("utf-8")
        if words.used_where_seen(encoded, index.module_of(context.path)):
            continue
        if position == 0 and words.exported_to_lookups(index.module_of(context.path), name):
            continue
        here, definitions = _mentions(source, encoded), _definitions(source, encoded)
        if here > definitions:
            # Mentions inside the definition itself (``super(Loss, self)``, a recursive call) use nothing.
            inside = context.memoized("reached.inside", node, lambda n: _words_text(context.module.code_for_node(n).encode("utf-8", "replace")))
            if here - _mentions(inside, encoded) > definitions - 1 and not (
                position == 0 and _named_only_by_unreached(context, words, name)
            ):
                continue
        return True
    return False


class _TopLevel:
    """A file's top-level definitions (the pre-pass's ``ast`` tree of its whole text, else parsed here) and the words each one uses, and the
    words its other top-level code uses (imports and ``__all__`` left out)."""

    def __init__(self, source: str, tree: Optional[ast.Module] = None) -> None:
        self.uses: Dict[str, Counter] = {}
        self.kept: Set[str] = set()  # decorated, or defined more than once: alive whatever names them
        self.code: Counter = Counter()
        if tree is None:
            try:
                tree = ast.parse(source)
            except (SyntaxError, ValueError, RecursionError):
                self.code = Counter({"*": 1})  # unreadable: every name counts as used
                return
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = statement.name
                if name in self.uses or statement.decorator_list:
                    self.kept.add(name)
                used = _identifiers(statement)
                used[name] -= 1  # its own name in its ``def``
                self.uses[name] = used
            elif not isinstance(statement, (ast.Import, ast.ImportFrom)) and not _is_exports(statement):
                self.code.update(_identifiers(statement))


def _identifiers(node: ast.AST) -> Counter:
    found: Counter = Counter()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            found[inner.id] += 1
        elif isinstance(inner, ast.Attribute):
            found[inner.attr] += 1
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[inner.name] += 1
        elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            found.update(word.decode() for word in _WORD.findall(inner.value.encode("utf-8", "replace")))
        elif isinstance(inner, ast.alias):
            found.update((inner.asname or inner.name).split("."))
    return found


def _is_exports(statement: ast.stmt) -> bool:
    return isinstance(statement, (ast.Assign, ast.AugAssign)) and any(
        isinstance(target, ast.Name) and target.id == "__all__" for target in getattr(statement, "targets", [getattr(statement, "target", None)])
    )


def _named_only_by_unreached(context: "FileContext", words: "_Words", name: str) -> bool:
    """Whether every mention of the top-level ``name`` in this file sits in other top-level definitions of the
    file that are unreached themselves (``weights_init_normal`` named only by an ``init_weights`` nothing calls),
    followed through the file's definitions; none elsewhere in the project (checked by the caller)."""
    top = context.memoized("reached.top-level", context.module, lambda _: _TopLevel(context.source, context.ast_tree))
    verdicts: Dict[str, bool] = context.memoized("reached.unreached-top", context.module, lambda _: {})
    module = context.project.module_of(context.path) if context.project is not None else None

    def unreached(current: str, trail: FrozenSet[str]) -> bool:
        if current in verdicts:
            return verdicts[current]
        if current in trail:
            return True  # reached only through itself
        if (
            current not in top.uses or current in top.kept or top.code.get(current, 0) > 0 or top.code.get("*", 0)
            or _CALLED_BY_NAME.match(current) or words.used_where_seen(current.encode("utf-8"), module)
        ):
            result = False
        else:
            callers = [other for other, used in top.uses.items() if other != current and used.get(current, 0) > 0]
            result = all(unreached(other, trail | {current}) for other in callers)
        if not trail:
            verdicts[current] = result
        return result

    return unreached(name, frozenset())


# A module of a program whose modules import one another that none imports, runs or names: nothing in it runs.
_DEAD_MODULE = (b"", b"")
# Files a test runner loads by their name (pytest's default collection and its ``conftest.py``).
_COLLECTED_BY_NAME = re.compile(r"^(test_\w*|\w*_test|conftest)\.py$")


def _file_texts(context: "FileContext", index: ProjectIndex):
    """(the file's code as edited, as the project read it), comments, imports and ``__all__`` left out
    (:func:`_used_text`); :data:`_DEAD_MODULE` for a module that no part of the program reaches; None outside a
    program."""
    if index.is_shadowed(context.path) or _imports_a_missing_module(context, index):
        return _DEAD_MODULE
    module = index.module_of(context.path)
    if (
        module is not None and index.is_imported(module) and _imported_only_by_failing_files(index, module)
        and not _runs_at_top_level(context)  # a script its importers fail to import still runs on its own
    ):
        return _DEAD_MODULE
    if not _in_program(context, index):
        return _DEAD_MODULE if _dead_module(context, index) else None
    return _used_text(_words_text(context.source.encode("utf-8", "replace"))), _used_text(_words_text(_disk_text(context, index)))


def _imports_a_missing_module(context: "FileContext", index: ProjectIndex) -> bool:
    if context.path.endswith(NOTEBOOK_SUFFIX):
        return False
    return _import_fails(context.path, context.ast_tree, index)


def _import_fails(path: str, tree: Optional[ast.Module], index: ProjectIndex) -> bool:
    """The file's top level imports, on no condition, what cannot be imported from it, so the import raises and
    nothing after it runs:

    - a module of one of the project's packages that the project does not hold (``from models.dual_norm import
      X`` where ``models/`` has no ``dual_norm``);
    - a package the project holds only in other folders, from a script outside packages that nothing puts on
      its path: Python finds ``dataset`` beside the script (or, run with ``-m``, in a folder above it), not in a
      sibling folder, unless the file edits ``sys.path``, a launcher sets ``PYTHONPATH`` or the project installs;
    - a name the project's module beside it does not define (``from losses import CE_loss`` where ``losses.py``
      has no ``CE_loss``), when that module binds its names plainly (no star import, no module ``__getattr__``,
      no writes through ``globals()``)."""
    if tree is None:
        return False
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            names = [statement.module]
        elif isinstance(statement, ast.Import):
            names = [alias.name for alias in statement.names]
        else:
            continue
        for name in names:
            if _beyond_reach(path, index, name) or _nowhere_in_its_package(path, index, name):
                return True
            resolved = index.resolve_from(path, name)
            if index.is_module(resolved) and not index.compiles(resolved):
                return True  # importing it raises SyntaxError
            if index.is_module(resolved) and _module_import_fails(index, resolved):
                return True  # importing it runs its own top-level imports, and one of them raises
            package, dot, _ = name.rpartition(".")
            if not dot or index.is_module(resolved):
                continue
            holder = index.module_path(index.resolve_from(path, package))
            if holder is None or not holder.endswith("__init__.py"):
                continue
            folder, stem = os.path.dirname(holder), name.rpartition(".")[2]
            try:
                present = any(entry == stem or entry.startswith(stem + ".") for entry in os.listdir(folder))
            except OSError:
                present = True
            if not present:  # no source, extension, stub or folder of that name: nothing to import
                return True
        if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            if _names_not_defined(path, index, statement):
                return True
    return False


_ASKING = threading.local()  # .modules: those whose import this thread is judging (an import cycle counts as succeeding)


def _module_import_fails(index: ProjectIndex, module: str) -> bool:
    """Importing the project's ``module`` raises at one of its own top-level imports (:func:`_import_fails`, which
    follows the modules those import in turn): ``from model import CLIP`` where ``model.py`` imports a name
    ``utils.py`` does not define."""
    asking = getattr(_ASKING, "modules", None)
    if asking is None:
        asking = _ASKING.modules = set()
    if module in asking:
        return False

    def compute() -> bool:
        facts, path = index.module_facts(module), index.module_path(module)
        if facts is None or path is None:
            return False
        asking.add(module)
        try:
            return _import_fails(path, facts.tree, index)
        finally:
            asking.discard(module)

    return index.fact(f"reached.module-import-fails:{module}", compute)  # type: ignore[return-value]


# A file that changes where imports are found, or says where a launcher should look.
_PATH_EDITS = re.compile(rb"\bsys\.path\b|\bPYTHONPATH\b|\bsite\.addsitedir\b|\bimportlib\.util\.spec_from_file_location\b")
_INSTALLERS = ("setup.py", "setup.cfg", "pyproject.toml")
_LAUNCHERS = (".sh", ".bash", ".cfg", ".ini", ".toml", ".yaml", ".yml", ".env")


def _beyond_reach(path: str, index: ProjectIndex, name: str) -> bool:
    """``import first.rest`` in a script outside packages, where ``first`` is a package or module the project
    holds, but neither beside the script nor in a folder above it, and nothing puts another folder on the path."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isfile(os.path.join(folder, "__init__.py")):
        return False
    first, dot, _ = name.partition(".")
    holders = _placements(index).get(first)
    if not dot or not holders or not index.is_module(name):
        return False  # a bare name may be installed; ``dataset.cifar100`` as the project holds it is the project's
    root = _project_root(index)
    current = folder
    while True:
        if current in holders or any(os.path.exists(os.path.join(current, first + suffix)) for suffix in ("", ".py")):
            return False
        if current == root or os.path.dirname(current) == current:
            break
        current = os.path.dirname(current)
    module = index.module_of(path)
    if module is None or _PATH_EDITS.search(index.module_bytes(module)):
        return False
    return not _project_sets_paths(index)


def _nowhere_in_its_package(path: str, index: ProjectIndex, name: str) -> bool:
    """``import pkg.sub`` where ``pkg`` is a package folder of the project (with or without ``__init__.py``) in the
    importing file's folder or a folder above it (so it is the ``pkg`` Python finds, not an installed one), and no
    folder of that name holds ``sub``: a notebook's ``from FNO.fno_2d_time import X`` below an ``FNO/`` that never
    had it. A top-level module of that name (``pkg.py``) may hold anything: then nothing is said."""
    first, dot, rest = name.partition(".")
    folders = _placements(index).get(first)
    if not dot or not folders:
        return False
    here = os.path.dirname(os.path.abspath(path))
    if not any(here == folder or here.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders):
        return False  # a folder elsewhere (a vendored copy) does not hide what is installed
    parts = rest.split(".")
    for folder in folders:
        base = os.path.join(folder, first)
        if not os.path.isdir(base):
            return False  # ``first.py``: a module, whose attributes are not files
        target = os.path.join(base, *parts)
        if os.path.isdir(target) or any(os.path.exists(target + suffix) for suffix in (".py", ".pyi", ".so", ".pyd")):
            return False
        try:
            if any(entry.startswith(parts[-1] + ".") for entry in os.listdir(os.path.dirname(target))):
                return False  # an extension module (``sub.cpython-311-x86_64-linux-gnu.so``)
        except OSError:
            return False
    return True


def _placements(index: ProjectIndex) -> Dict[str, frozenset]:
    """Each top-level name a file of the project can be imported by from some folder -> the folders that hold it
    (``dataset`` -> the folders with a ``dataset/`` package or a ``dataset.py``)."""

    def compute() -> Dict[str, frozenset]:
        root = _project_root(index)
        found: Dict[str, set] = {}
        for path in index.files():
            if not path.endswith(".py"):
                continue
            folder, file = os.path.split(os.path.abspath(path))
            found.setdefault(file[:-3], set()).add(folder)
            # Every folder above it is a package, or a namespace package without ``__init__.py``.
            while folder != root and os.path.dirname(folder) != folder:
                parent, package = os.path.split(folder)
                found.setdefault(package, set()).add(parent)
                folder = parent
        return {name: frozenset(folders) for name, folders in found.items()}

    return index.fact("reached.placements", compute)  # type: ignore[return-value]


def _project_root(index: ProjectIndex) -> str:
    def compute() -> str:
        folders = [os.path.dirname(os.path.abspath(path)) for path in index.files()]
        return os.path.commonpath(folders) if folders else ""

    return index.fact("reached.root", compute)  # type: ignore[return-value]


def _project_sets_paths(index: ProjectIndex) -> bool:
    """The project installs (setup.py, pyproject.toml) or its code or launchers edit the import path."""

    def compute() -> bool:
        if any(_PATH_EDITS.search(data) for data in index.every_text()):
            return True
        root = _project_root(index)
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = [d for d in subdirs if not d.startswith(".") and d not in ("node_modules", "__pycache__")]
            for file in files:
                if file in _INSTALLERS and (file != "pyproject.toml" or _declares_a_package(os.path.join(directory, file))):
                    return True
                if file.endswith(_LAUNCHERS) or file in ("Makefile", "Dockerfile"):
                    try:
                        with open(os.path.join(directory, file), "rb") as handle:
                            if _PATH_EDITS.search(handle.read(1 << 20)):
                                return True
                    except OSError:
                        return True
        return False

    return index.fact("reached.sets-paths", compute)  # type: ignore[return-value]


def _declares_a_package(path: str) -> bool:
    """A ``pyproject.toml`` that builds a package (not one that only configures tools, torchlint among them)."""
    try:
        with open(path, "rb") as handle:
            return bool(re.search(rb"(?m)^\[(?:project|build-system|tool\.poetry|tool\.setuptools)\b", handle.read(1 << 20)))
    except OSError:
        return True


def _names_not_defined(path: str, index: ProjectIndex, statement: ast.ImportFrom) -> bool:
    """``from m import a, b`` where ``m`` is a module of the project, found from this file, whose top level binds
    its names plainly and binds neither ``a`` nor a submodule ``a``: ImportError."""
    module = index.canonical(index.resolve_from(path, statement.module or ""))
    found = index.module_path(module)
    if found is None or any(alias.name == "*" for alias in statement.names):
        return False
    folder = os.path.dirname(os.path.abspath(path))
    beside = os.path.join(folder, *(statement.module or "").split("."))
    if os.path.abspath(found) not in (beside + ".py", os.path.join(beside, "__init__.py")):
        return False  # only the module Python finds beside the script is known to be the one imported
    defined = _top_level_names(index, module)
    if defined is None:
        return False
    package_folder = os.path.dirname(found) if found.endswith("__init__.py") else None
    for alias in statement.names:
        if alias.name in defined:
            continue
        if package_folder is not None and any(
            os.path.exists(os.path.join(package_folder, alias.name + suffix)) for suffix in ("", ".py")
        ):
            continue
        return True
    return False


_OPEN_NAMESPACE = re.compile(rb"\bglobals\s*\(|\b__getattr__\b|\bsys\.modules\b|(?<![\w.])(?:exec|setattr)\s*\(|\b__dict__\b")


def _top_level_names(index: ProjectIndex, module: str) -> Optional[FrozenSet[str]]:
    """Every name ``module``'s top level may bind, wherever in it (branches, ``try``, loops, ``global`` in a
    function); None when it may bind names no statement spells (a star import, ``globals()``, ``__getattr__``)."""

    def compute() -> Optional[FrozenSet[str]]:
        data = index.module_bytes(module)
        if _OPEN_NAMESPACE.search(data):
            return None
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            return None
        names: Set[str] = set()
        pending = list(tree.body)
        while pending:
            node = pending.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        return None
                    names.add(alias.asname or alias.name.partition(".")[0])
                continue
            for child in ast.walk(node):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    names.add(child.id)
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child is not node:
                    names.add(child.name)
                elif isinstance(child, (ast.Import, ast.ImportFrom)):
                    for alias in child.names:
                        if alias.name == "*":
                            return None
                        names.add(alias.asname or alias.name.partition(".")[0])
                elif isinstance(child, ast.alias):
                    continue
                elif isinstance(child, ast.ExceptHandler) and child.name:
                    names.add(child.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                names.update(node.names)
        return frozenset(names)

    return index.fact(f"reached.top-level-names:{module}", compute)  # type: ignore[return-value]


def _imported_only_by_failing_files(index: ProjectIndex, module: str) -> bool:
    """Every file that imports ``module`` raises at one of its top-level imports, or is itself a module (no
    script) imported only by such files: ``distiller_zoo/KD.py`` of an experiment folder whose scripts all import
    a ``dataset`` package the folder no longer holds. A notebook that imports it runs it."""
    importers = _importers(index).get(os.path.abspath(index.module_path(module) or ""))
    if not importers:
        return False  # imported by a notebook only
    return index.fact(f"reached.imported-only-by-failing:{module}", lambda: _no_live_importer(index, importers))  # type: ignore[return-value]


def _no_live_importer(index: ProjectIndex, importers: frozenset) -> bool:
    """Whether none of ``importers`` runs its top-level imports: a module is live when its imports succeed and it
    runs code at its top level, or no module imports it (a script, a notebook's module), or a live module
    imports it. The importers are searched upwards, each module once per question: live when some chain of
    importers that neither fail nor run code by themselves reaches one that runs (a cycle reaches nothing)."""
    every_importer = _importers(index)
    seen: Set[str] = set()
    pending = sorted(importers, reverse=True)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        own = _own_liveness(index, name)
        if own:
            return False
        if own is None:
            pending.extend(sorted(every_importer.get(os.path.abspath(index.module_path(name) or ""), ()), reverse=True))
    return True


def _own_liveness(index: ProjectIndex, name: str) -> Optional[bool]:
    """What a module shows of its liveness by itself: False when it does not compile or one of its top-level
    imports fails, True when it runs code at its top level or no module imports it, None when it lives as long
    as one of its importers does. Asked once per module, whichever importer's question reaches it."""

    def compute() -> Optional[bool]:
        facts, path = index.module_facts(name), index.module_path(name)
        if facts is None or path is None:
            return True
        if not index.compiles(name) or _import_fails(path, facts.tree, index):
            return False
        if not _importers(index).get(os.path.abspath(path)) or any(_runs(statement, facts.qualify) for statement in facts.tree.body):
            return True
        return None

    return index.fact(f"reached.own-liveness:{name}", compute)  # type: ignore[return-value]


def _importers(index: ProjectIndex) -> Dict[str, frozenset]:
    """A module's file -> the project modules whose import lines name it."""

    def compute() -> Dict[str, frozenset]:
        found: Dict[str, set] = {}
        for name in index.module_paths():
            for imported in index.imported_files(name):
                found.setdefault(imported, set()).add(name)
        return {name: frozenset(importers) for name, importers in found.items()}

    return index.fact("reached.importers", compute)  # type: ignore[return-value]


def _in_program(context: "FileContext", index: ProjectIndex) -> bool:
    """The file is part of a program the project shows: a notebook, a script, or a module another one imports. A
    module of a library folder whose only top-level code is its ``__main__`` self-test is no script of it."""
    module = index.module_of(context.path)
    if module is not None and index.is_imported(module):
        return True
    if context.path.endswith(NOTEBOOK_SUFFIX):
        return True
    return _runs_at_top_level(context) and not _library_self_test(context, index, module)


def _library_self_test(context: "FileContext", index: ProjectIndex, module: Optional[str]) -> bool:
    """A module nothing imports, whose top level runs nothing but ``if __name__ == "__main__":`` blocks, in a folder
    whose other modules files of other folders import (``models/``, whose ``backbone_attention`` the scripts
    import): a developer's check of a library module, not a program of the project (d18: 20 findings read false
    in a ``models/backbone_stn.py`` nothing imports)."""
    if module is None:
        return False
    facts = index.module_facts(module)
    if facts is None:
        return False
    running = [statement for statement in facts.tree.body if _runs(statement, facts.qualify)]
    if not running or not all(_is_main_guard(statement) for statement in running):
        return False
    if any(_reads_command_line(statement) for statement in _with_called_functions(running, facts.tree)):
        return False  # it parses a command line (itself or in a function it calls): a program someone runs
    return os.path.dirname(os.path.abspath(context.path)) in _library_folders(index)


def _with_called_functions(statements: List[ast.stmt], tree: ast.Module, depth: int = 2) -> List[ast.stmt]:
    """``statements`` and the top-level functions of ``tree`` they call by name (``main()`` under the guard), followed
    ``depth`` calls deep."""
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: List[ast.stmt] = list(statements)
    frontier = list(statements)
    for _ in range(depth):
        called = {
            node.func.id for statement in frontier for node in ast.walk(statement)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions
        }
        frontier = [functions[name] for name in sorted(called) if functions[name] not in found]
        found.extend(frontier)
    return found


def _reads_command_line(statement: ast.stmt) -> bool:
    """``parser.parse_args()`` (or ``parse_known_args``) or ``sys.argv`` in ``statement``."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("parse_args", "parse_known_args"):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "argv" and isinstance(node.value, ast.Name) and node.value.id == "sys":
            return True
    return False


def _is_main_guard(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(statement.test))


def _library_folders(index: ProjectIndex) -> frozenset:
    """The folders holding a module that a file of another folder imports."""

    def compute() -> frozenset:
        paths = index.module_paths()
        folders = set()
        for module, path in paths.items():
            here = os.path.dirname(os.path.abspath(path))
            for imported in index.imports_of(module):
                target = index.module_path(imported)
                if target is not None and os.path.dirname(os.path.abspath(target)) != here:
                    folders.add(os.path.dirname(os.path.abspath(target)))
        return frozenset(folders)

    return index.fact("reached.library-folders", compute)  # type: ignore[return-value]


def _dead_module(context: "FileContext", index: ProjectIndex) -> bool:
    """A module of the project that is no script and that nothing imports or names (its name is no word of any
    other file: no string, no config), in a project whose modules import one another (a folder of excerpts,
    where no file imports another, shows no program to judge by). Readers of calibration draws d1-d9 judged 30
    of 33 deprecated-overload findings in such files (optimizers nothing constructs) false."""
    module = index.module_of(context.path)
    stem = os.path.basename(context.path)
    if module is None or stem == "__init__.py" or _COLLECTED_BY_NAME.match(stem) or not index.imports_within():
        return False
    facts = index.module_facts(module)  # the whole file: the context may hold only the regions a rule reads
    if facts is None:
        return False
    if any(_runs(statement, facts.qualify) for statement in facts.tree.body) and not _library_self_test(context, index, module):
        return False
    name = module.rpartition(".")[2].encode("utf-8")
    own = _code_text(_disk_text(context, index))
    if _words(index).counts.get(name, 0) - _mentions(own, name) <= 0:
        return True
    folder = os.path.basename(os.path.dirname(os.path.abspath(context.path)))
    pattern = _module_reference(module, folder)
    return _module_mentions(index, module, pattern) - len(pattern.findall(own)) <= 0


def _module_reference(module: str, folder: str) -> "re.Pattern[bytes]":
    """A mention that can load ``module`` without an import statement naming it: its dotted path
    (``models.backbone``), its file (``backbone.py``, ``models/backbone``), ``-m backbone``, an entry point
    (``backbone:main``).  A variable or a string of the same word (``backbone = ...``, ``split="train"``) loads
    nothing: without a computed import in the project (``_DYNAMIC``) no string becomes a module."""
    name = re.escape(module.rpartition(".")[2].encode("utf-8"))
    forms = [rb"%s\.pyw?\b" % name, rb"/%s(?![\w])" % name, rb"-m\s+(?:[\w.]+\.)?%s(?![\w])" % name, rb"(?<![\w.])%s:(?=[A-Za-z_])" % name]
    # Its dotted path: through its package, or through its folder (a namespace package: ``plugins.zoo``).
    for parent in {module.rpartition(".")[0].rpartition(".")[2], folder} - {""}:
        forms.append(rb"(?<![\w])%s\.%s(?![\w])" % (re.escape(parent.encode("utf-8")), name))
    return re.compile(b"|".join(sorted(forms)))


def _module_mentions(index: ProjectIndex, module: str, pattern: "re.Pattern[bytes]") -> int:
    """How often the project's code (comments left out) holds a :func:`_module_reference`."""

    def compute() -> int:
        # Every form of the reference writes the module's last name: a text without it holds none.
        name = module.rpartition(".")[2].encode("utf-8")
        return sum(len(pattern.findall(code)) for code in _words(index).code_texts if name in code)

    return index.fact(f"reached.module-mentions:{pattern.pattern!r}", compute)  # type: ignore[return-value]


# Calls that set a process up rather than run a program: a module whose top level only makes them (beside its
# definitions) does nothing when run, so they do not make it a script (d16: a module nothing imports kept its
# findings at `high` for its `warnings.filterwarnings("ignore")`).
_SET_UP_CALLS = (
    "warnings.", "logging.", "sys.path.", "os.environ.", "random.seed", "numpy.random.seed", "numpy.set_printoptions",
    "torch.manual_seed", "torch.cuda.manual_seed", "torch.set_", "torch.backends.", "matplotlib.use", "matplotlib.rc",
    "matplotlib.pyplot.style.use", "matplotlib.pyplot.rc", "pandas.set_option",
)


def _sets_up(qualified: Optional[str]) -> bool:
    return qualified is not None and qualified.startswith(_SET_UP_CALLS)


def _runs(statement: ast.stmt, qualify) -> bool:
    """A top-level statement that runs code (``ast``'s reading of :func:`_runs_at_top_level`)."""
    if isinstance(statement, (ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith)):
        return True
    if isinstance(statement, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(statement.test)):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return not _sets_up(qualify(statement.value.func))
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Await)


def _runs_at_top_level(context: "FileContext") -> bool:
    """A statement of the module's top level that runs code: a call (not a set-up call), a loop, a ``with``, a
    ``__main__`` block. The compound statements no rule needed are not in the parsed module (the pre-pass left
    them out): they are read from the file's ``ast`` tree."""
    if _runs_in_parsed(context):
        return True
    tree = context.ast_tree if context.line_map else None
    return tree is not None and any(_compound_runs(statement, context.source) for statement in tree.body)


def _compound_runs(statement: ast.stmt, source: str) -> bool:
    """:func:`_runs_in_parsed`'s reading of a compound statement, from ``ast``: a loop, a ``with``, an ``if``
    whose test names ``__name__``."""
    if isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
        return True
    return isinstance(statement, ast.If) and "__name__" in (ast.get_source_segment(source, statement.test) or "")


def _runs_in_parsed(context: "FileContext") -> bool:
    for statement in context.module.body:
        if isinstance(statement, (cst.For, cst.While, cst.With)):
            return True
        if isinstance(statement, cst.If) and "__name__" in cst.Module([]).code_for_node(statement.test):
            return True
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                value = getattr(small, "value", None)
                if isinstance(small, cst.Expr) and isinstance(value, cst.Await):
                    return True
                if isinstance(small, cst.Expr) and isinstance(value, cst.Call) and not _sets_up(context.qualified_name(value.func)):
                    return True
    return False


# Any ``def`` (a method's too), and a lookup of an attribute by a computed name (``getattr(self, "on_" + event)``),
# which may reach any method.
_ANY_DEF = re.compile(rb"\bdef[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
_COMPUTED_ATTRIBUTE = re.compile(rb"\bgetattr\s*\(\s*[^,]+?,\s*+(?!['\"][^'\"]*['\"]\s*[,)])|\b(?:methodcaller|attrgetter)\s*\(\s*+(?!['\"])")


def _method_never_named(context: "FileContext", words: "_Words", owner: cst.ClassDef, name: str) -> bool:
    """A method whose name the project writes nowhere but in ``def`` lines, of a class that inherits from no
    class outside this file (a framework may call its own hooks by name: ``training_step``, ``reset_parameters``),
    in a project that never looks an attribute up by a computed name: nothing calls it."""
    if name.startswith("__") or words.dynamic or words.computed_attributes:
        return False
    encoded = name.encode("utf-8")
    if words.counts.get(encoded, 0) > words.defined.get(encoded, 0):
        return False
    return _inherits_only_from_this_file(context, owner, frozenset())


def _inherits_only_from_this_file(context: "FileContext", owner: cst.ClassDef, trail: frozenset) -> bool:
    """Whether every base of ``owner`` is ``object`` or a class this file defines at its top level (followed)."""
    if owner.keywords:
        return False  # a metaclass may call anything
    for base in owner.bases:
        if isinstance(base.value, cst.Name) and base.value.value == "object":
            continue
        if not isinstance(base.value, cst.Name) or base.value.value in trail:
            return False
        local = next(
            (statement for statement in context.module.body
             if isinstance(statement, cst.ClassDef) and statement.name.value == base.value.value),
            None,
        )
        if local is None or not _inherits_only_from_this_file(context, local, trail | {base.value.value}):
            return False
    return True


# What unittest and pytest run of a test class: its test methods and set-up/tear-down hooks, by their names.
_RUNNER_CALLED_METHODS = re.compile(r"^(test\w*|setUp|tearDown|setUpClass|tearDownClass|setup_method|teardown_method|setup_class|teardown_class)$")
_TEST_CASES = frozenset({
    "unittest.TestCase", "unittest.case.TestCase", "unittest.IsolatedAsyncioTestCase", "unittest.async_case.IsolatedAsyncioTestCase",
})


def _collected_by_a_test_runner(context: "FileContext", owner: cst.ClassDef) -> bool:
    """A class a test runner finds by itself: a ``unittest.TestCase`` (``unittest.main()`` and pytest load every one
    of a module they run), or a ``Test*`` class of a file pytest collects by its name (its default rules)."""
    if any(context.qualified_name(base.value) in _TEST_CASES for base in owner.bases):
        return True
    return bool(_COLLECTED_BY_NAME.match(os.path.basename(context.path))) and owner.name.value.startswith("Test")


def _owning_class(owners, position: int) -> Optional[cst.ClassDef]:
    """The class whose body holds ``owners[position]`` directly (a method), else None."""
    if position and isinstance(owners[position - 1], cst.ClassDef):
        return owners[position - 1]
    return None


def _disk_text(context: "FileContext", index: ProjectIndex) -> bytes:
    """The linted file's text as the project read it (the counts hold it; the context's text may be newer)."""
    if context.path.endswith(NOTEBOOK_SUFFIX):
        try:
            with open(context.path, "rb") as handle:
                return notebook_code(handle.read())
        except OSError:
            return b""
    module = index.module_of(context.path)
    if module is None:
        return b""
    return index.module_bytes(module)
