"""Where a fix's new import goes: before its first use, after a shebang and a coding declaration, once.

Found by the reliability work (issue 8): an import inserted at offset 0 pushed a
``# -*- coding: latin-1 -*-`` line to line 3, where Python no longer reads it,
so the rewritten latin-1 file stopped compiling; and an import added after the
file's last import could land below a module-level use (NameError on import).

A test rule of this module rewrites ``magic(x)`` to ``jsonlib.dumps(x)`` and
asks for ``import json as jsonlib``, so that the fixed code can be executed.
"""
from __future__ import annotations

from typing import Dict

import libcst as cst
import pytest

from torchlint import cli, config, engine, registry, source
from torchlint.rule import Applicability, FixSpec, ImportRequirement, Replacement, Rule


class MagicToJson(Rule):
    """
    ## What it does
    A test double: rewrites `magic(x)` as `jsonlib.dumps(x)`.

    ## Why is this bad?
    It is not.

    ## Example
    ```python
    magic(x)
    ```

    ## Use instead
    ```python
    jsonlib.dumps(x)
    ```

    ## Fix safety
    Safe.
    """

    code = "TL996"
    name = "magic-to-json"
    message = "test double"
    triggers = ("magic",)
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "magic":
            new = node.with_changes(func=cst.Attribute(cst.Name("jsonlib"), cst.Name("dumps")))
            spec = FixSpec(Applicability.SAFE, "use json", (Replacement(node, new),), (ImportRequirement("json", "jsonlib"),))
            self.report(node, fix=spec)


@pytest.fixture
def magic(monkeypatch) -> config.Settings:
    rules: Dict = dict(registry.all_rules())
    rules[MagicToJson.code] = MagicToJson
    monkeypatch.setattr(registry, "all_rules", lambda: dict(sorted(rules.items())))
    return config.Settings(enabled=frozenset({MagicToJson.code}))


def _fix(text: str, settings: config.Settings) -> engine.FixResult:
    result = engine.fix_text(text, "m.py", settings)
    assert result.result.diagnostics == []
    again = engine.fix_text(result.text, "m.py", settings)
    assert again.applied == 0 and again.text == result.text
    return result


def _run(text: str) -> dict:
    namespace: dict = {"x": [1, 2]}
    exec(compile(text, "<fixed>", "exec", dont_inherit=True), namespace)
    return namespace


def test_import_goes_before_a_module_level_use_that_precedes_later_imports(magic):
    text = "import os\ny = magic(x)\nimport sys\n"
    fixed = _fix(text, magic)
    assert fixed.applied == 1
    assert fixed.text == "import os\nimport json as jsonlib\ny = jsonlib.dumps(x)\nimport sys\n"
    assert _run(fixed.text)["y"] == "[1, 2]"


def test_two_uses_with_an_import_between_them_add_the_import_once(magic):
    text = "import os\na = magic(x)\nimport sys\ndef f():\n    return magic(x)\nb = f()\n"
    fixed = _fix(text, magic)
    assert fixed.applied == 2
    assert fixed.text.count("import json as jsonlib") == 1
    namespace = _run(fixed.text)
    assert namespace["a"] == namespace["b"] == "[1, 2]"


def test_an_import_sharing_the_line_of_the_use_is_not_an_anchor(magic):
    text = "import os; y = magic(x)\n"
    fixed = _fix(text, magic)
    assert _run(fixed.text)["y"] == "[1, 2]"


@pytest.mark.parametrize(
    "header",
    [
        "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n",
        "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n\n# about f\n",
        "# -*- coding: latin-1 -*-\n# Copyright caf\xe9\n",
    ],
)
def test_without_imports_the_new_one_goes_below_the_shebang_and_the_coding_line(magic, header):
    text = header + "def f(x):\n    return magic(x)\n"
    fixed = _fix(text, magic)
    assert fixed.text.startswith(header)
    assert "import json as jsonlib\ndef f(x):" in fixed.text


def test_a_latin1_file_with_a_shebang_still_compiles_after_the_cli_fix(magic, tmp_path, capsys):
    path = tmp_path / "script.py"
    original = "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n# caf\xe9 cr\xe8me\nLABEL = 'd\xe9j\xe0 vu'\ny = magic(LABEL)\n"
    path.write_bytes(original.encode("latin-1"))

    code = cli.main(["check", "--select", "TL996", "--fix", "--no-cache", str(path)])
    capsys.readouterr()

    data = path.read_bytes()
    assert code == 0
    assert data.decode("latin-1").splitlines()[:2] == ["#!/usr/bin/env python", "# -*- coding: latin-1 -*-"]
    assert source.decode(data).encoding == "iso-8859-1" or source.decode(data).encoding.startswith("latin-1")
    namespace: dict = {}
    exec(compile(data, str(path), "exec", dont_inherit=True), namespace)  # bytes: Python reads the cookie itself
    assert namespace["y"] == '"d\\u00e9j\\u00e0 vu"'


def test_docstring_then_import(magic):
    text = '"""Module doc."""\ndef f(x):\n    return magic(x)\n'
    fixed = _fix(text, magic)
    assert fixed.text == '"""Module doc."""\nimport json as jsonlib\ndef f(x):\n    return jsonlib.dumps(x)\n'
