"""Reading the fixtures/ conventions (see fixtures/README.md)."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from torchlint import config, engine, registry
from torchlint.rule import Confidence

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
_CODE = r"TL\d{3}(?::(?:low|medium|high))?"
EXPECT = re.compile(rf"#\s*expect:\s*(?P<codes>{_CODE}(?:\s*,\s*{_CODE})*)")
# Without a level, an expected finding must be shown at the default floor (high).
DEFAULT_LEVELS = frozenset({"high"})
# Codemod fixtures fix the findings of this level and above, unless `level=` says otherwise: a fix is tested
# whatever the level of the finding it belongs to (below the default level a numerics fix is unsafe).
CODEMOD_FLOOR = Confidence.MEDIUM
# A trap must stay silent at this level and above: the levels that promise at least 1 real finding in 2.
TRAP_FLOOR = Confidence.MEDIUM
HEADER = re.compile(r"^#\s*fixture:(?P<options>.*)$")


def checker_files() -> List[Path]:
    return sorted(FIXTURES.glob("*/checker/*.py"))


def python_parses(path: "Path | str") -> bool:
    """Whether Python itself parses the file. A fixture of torch 0.3 days (``x.cuda(async=True)``) does not:
    torchlint reads it with a stand-in (torchlint/source.py), but flake8 reports E999 and runs no plugin on it,
    and tools that parse with ``ast`` or LibCST alone cannot take it."""
    import ast

    try:
        ast.parse(Path(path).read_text(encoding="utf-8"))
    except SyntaxError:
        return False
    return True


def codemod_pairs() -> List[Tuple[Path, Path]]:
    pairs = []
    for source in sorted(FIXTURES.glob("*/fix/*.in.py")):
        pairs.append((source, source.with_name(source.name[: -len(".in.py")] + ".out.py")))
    return pairs


def expected_findings(text: str) -> Counter:
    """(line, code, levels) of each `# expect:` annotation: ``TL101`` is shown by default
    (high), ``TL101:medium`` at ``--confidence-level medium``, ``TL101:low`` only at ``low``."""
    expected: Counter = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for item in match.group("codes").split(","):
                code, _, level = item.strip().partition(":")
                expected[(number, code, frozenset({level}) if level else DEFAULT_LEVELS)] += 1
    return expected


def unmatched(expected: Counter, findings) -> Tuple[list, list]:
    """(missing annotations, unexpected findings): each finding meets at most one annotation of its line,
    code and level.  A ``low`` finding nobody annotated is not unexpected: traps are judged at ``medium``
    and above, the levels that keep a promise."""
    left = list(expected.elements())
    unexpected = []
    for finding in findings:
        key = next(
            (k for k in left if k[0] == finding.location.line and k[1] == finding.code and finding.confidence.value in k[2]),
            None,
        )
        if key is None:
            if finding.confidence.at_least(TRAP_FLOOR):
                unexpected.append((finding.location.line, finding.code, finding.confidence.value))
        else:
            left.remove(key)
    missing = [(line, code, "/".join(sorted(levels))) for line, code, levels in left]
    return sorted(missing), sorted(unexpected)


def settings_for(codes, target: Optional[Tuple[int, int]] = None, floor: Confidence = Confidence.LOW) -> config.Settings:
    """Checker fixtures see every finding (floor ``low``), so that ``TL101:low`` annotations can be checked."""
    return config.Settings(enabled=frozenset(codes), target_torch_version=target, confidence_floor=floor)


def all_rules_settings(target: Optional[Tuple[int, int]] = None) -> config.Settings:
    return settings_for(registry.all_rules(), target)


def _target(value: str) -> Tuple[int, int]:
    major, minor = value.split(".")[:2]
    return int(major), int(minor)


def checker_target(text: str) -> Optional[Tuple[int, int]]:
    """`# fixture: target=2.4` on a checker file's first line: lint as for that torch version."""
    match = HEADER.match(text.split("\n", 1)[0])
    if not match:
        return None
    for item in match.group("options").split():
        key, _, value = item.partition("=")
        if key != "target":
            raise ValueError(f"unknown checker fixture option {key!r}")
        return _target(value)
    return None


def codemod_options(source_path: Path, text: str) -> Dict[str, object]:
    """The folder's rule with unsafe fixes, unless a `# fixture:` first line says otherwise."""
    folder = source_path.parent.parent.name
    options: Dict[str, object] = {"select": [folder], "unsafe": True, "target": None, "level": CODEMOD_FLOOR}
    first = text.split("\n", 1)[0]
    match = HEADER.match(first)
    if match:
        for item in match.group("options").split():
            key, _, value = item.partition("=")
            if key == "select":
                options["select"] = value.split(",")
            elif key == "unsafe":
                options["unsafe"] = value.lower() == "true"
            elif key == "target":
                options["target"] = _target(value)
            elif key == "level":
                options["level"] = Confidence(value)
            else:
                raise ValueError(f"{source_path}: unknown fixture option {key!r}")
    return options


def run_codemod(source_path: Path) -> engine.FixResult:
    text = source_path.read_text(encoding="utf-8")
    options = codemod_options(source_path, text)
    settings = settings_for(registry.expand_selectors(options["select"]), options["target"], options["level"])
    return engine.fix_text(text, str(source_path), settings, unsafe=bool(options["unsafe"]))


def project_findings(project: Path, code: str, capsys) -> List[dict]:
    """``torchlint check --select CODE`` at every level on the project folder ``project``, in this process (as a
    user runs it from the project's root); the JSON items."""
    import json
    import os

    from torchlint import cli

    here = os.getcwd()
    os.chdir(project)
    try:
        cli.main(["check", "--select", code, "--confidence-level", "low", "--output-format", "json", "--exit-zero", "--no-cache", "."])
    finally:
        os.chdir(here)
    return json.loads(capsys.readouterr().out)
