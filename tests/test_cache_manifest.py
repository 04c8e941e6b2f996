"""The cache's manifest (torchlint/cache.py): content keys behind a stat shortcut, TL403 dependencies, JSON, pruning.

What each test pins down:
- an mtime change alone costs a read and a hash, never a re-check; new bytes are a miss even when the size
  and the mtime are put back (the ctime changes) and even when the whole stat looks the same, as long as
  the entry is "racily clean" (hashed within RACY_SECONDS of the file's last change);
- the stat shortcut really skips reading an old, unchanged file;
- a TL403 dependency added, changed or removed invalidates the entries that looked it up, also when the
  index's module map is the run's own file list (a run over the project folder);
- entries are JSON (no pickle), round-trip findings with fixes exactly, and a manifest others may write
  is ignored;
- other run keys' manifests, the old one-pickle-per-file layout and long-unused entries are pruned.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from cli_support import BAD, CLEAN, HEADER, TL201_LINE, TL401_LINE
from fixture_support import FIXTURES
from test_cache import _manifests, project  # noqa: F401 (project is a fixture)
from torchlint import cache, cli, config, engine, runner
from torchlint.cache import Cache


@pytest.fixture
def check(capsys, monkeypatch):
    """Run ``torchlint check --output-format json`` in this process; (findings, paths that were checked, not served)."""
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "pinned")  # as in test_cache.check
    checked = []
    real_check_path = runner.check_path

    def counting(path, *args, **kwargs):
        checked.append(path)
        return real_check_path(path, *args, **kwargs)

    monkeypatch.setattr(runner, "check_path", counting)

    def run(*args: str, cwd: Path):
        checked.clear()
        here = os.getcwd()
        os.chdir(cwd)
        try:
            cli.main(["check", "--output-format", "json", "--exit-zero", "--jobs", "1", *args])
        finally:
            os.chdir(here)
        out = capsys.readouterr()
        return [(item["path"], item["line"], item["code"]) for item in json.loads(out.out)], sorted(os.path.basename(p) for p in checked)

    return run


def _manifest(project: Path) -> Path:
    (found,) = _manifests(project / ".torchlint_cache")
    return found


def _age_entries(project: Path, seconds: int) -> None:
    """Pretend every entry was hashed ``seconds`` later than it was (no longer racily clean)."""
    manifest = _manifest(project)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    for entry in data["files"].values():
        entry[2] += seconds * 1_000_000_000
    manifest.write_text(json.dumps(data), encoding="utf-8")


ONLY = ("--select", "TL201,TL401")
BAD_201 = HEADER + "\n" + TL201_LINE + "\n"
BAD_401 = HEADER + "\n" + TL401_LINE.ljust(len(TL201_LINE)) + "\n"


def test_a_touched_file_is_hashed_not_checked_and_its_stat_refreshed(project, check):
    model = project / "model.py"
    model.write_text(BAD, encoding="utf-8")
    cold, checked = check(*ONLY, ".", cwd=project)
    assert checked == ["model.py"] and {c for _, _, c in cold} == {"TL201", "TL401"}
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert check(*ONLY, ".", cwd=project) == (cold, [])
    entry = json.loads(_manifest(project).read_text(encoding="utf-8"))["files"]["./model.py"]
    assert entry[1][1] == stat.st_mtime_ns + 5_000_000_000


def test_new_bytes_with_the_same_size_and_mtime_are_a_miss(project, check):
    model = project / "model.py"
    assert len(BAD_201) == len(BAD_401)
    model.write_text(BAD_201, encoding="utf-8")
    assert check(*ONLY, ".", cwd=project)[0] == [("./model.py", 4, "TL201")]
    _age_entries(project, 60)  # an old entry: the stat shortcut applies
    stat = model.stat()
    model.write_text(BAD_401, encoding="utf-8")
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (model.stat().st_size, model.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert check(*ONLY, ".", cwd=project) == ([("./model.py", 4, "TL401")], ["model.py"])


def test_a_racily_clean_entry_is_hashed_even_when_the_whole_stat_matches(project, check, monkeypatch):
    # A second write within the clock tick of the first leaves size, mtime, ctime and inode as they were:
    # simulated by a stat that never changes.
    model = project / "model.py"
    model.write_text(BAD_201, encoding="utf-8")
    assert check(*ONLY, ".", cwd=project)[0] == [("./model.py", 4, "TL201")]
    frozen = model.stat()
    model.write_text(BAD_401, encoding="utf-8")
    real_stat = os.stat
    monkeypatch.setattr(cache.os, "stat", lambda path, *a, **k: frozen if os.path.basename(str(path)) == "model.py" else real_stat(path, *a, **k))
    monkeypatch.setattr(cache.os, "fstat", lambda fd: frozen)
    assert check(*ONLY, ".", cwd=project) == ([("./model.py", 4, "TL401")], ["model.py"])


def test_the_stat_shortcut_does_not_read_an_old_unchanged_file(project, check, monkeypatch):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    (project / "clean.py").write_text(CLEAN, encoding="utf-8")
    cold = check(*ONLY, ".", cwd=project)[0]
    _age_entries(project, 60)

    def no_reading(path):
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(cache, "_read_with_stat", no_reading)
    assert check(*ONLY, ".", cwd=project) == (cold, [])


def test_the_same_relative_path_from_another_folder_is_another_file(tmp_path, check):
    # One configuration above both folders: one run key, one manifest, and `model.py` names two files.
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.py").write_text(BAD, encoding="utf-8")
    first = check(*ONLY, "model.py", cwd=tmp_path / "a")
    assert first[1] == ["model.py"] and first[0]
    # Same bytes, same relative path, same stat shape: only the recorded absolute path tells them apart.
    assert check(*ONLY, "model.py", cwd=tmp_path / "b") == first
    assert check(*ONLY, "model.py", cwd=tmp_path / "b") == (first[0], [])


def _tl403_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "TL403" / "project" / "package_reexport", root)
    (root / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("paths", [("train.py",), (".",)], ids=["one-file", "project-folder"])
def test_a_dependency_added_changed_or_removed_invalidates_the_entry(tmp_path, check, paths):
    root = _tl403_project(tmp_path)
    data = root / "textpkg" / "data.py"
    variable = data.read_text(encoding="utf-8")
    padded = variable.replace("truncation=True, max_length", 'padding="max_length", truncation=True, max_length')
    train = "./train.py" if paths == (".",) else "train.py"
    finding = [(train, 10, "TL403")]

    data.unlink()  # the dataset module does not exist yet: the class is unknown, silence
    assert check("--select", "TL403", *paths, cwd=root)[0] == []
    assert check("--select", "TL403", *paths, cwd=root) == ([], [])
    data.write_text(variable, encoding="utf-8")  # added
    found = check("--select", "TL403", *paths, cwd=root)
    assert found[0] == finding and "train.py" in found[1]
    assert check("--select", "TL403", *paths, cwd=root) == (finding, [])
    data.write_text(padded, encoding="utf-8")  # changed
    found = check("--select", "TL403", *paths, cwd=root)
    assert found[0] == [] and "train.py" in found[1]
    data.write_text(variable, encoding="utf-8")
    assert check("--select", "TL403", *paths, cwd=root)[0] == finding
    data.unlink()  # removed
    found = check("--select", "TL403", *paths, cwd=root)
    assert found[0] == [] and "train.py" in found[1]


def test_entries_are_json_and_round_trip_findings_with_fixes(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    check(*ONLY, ".", cwd=project)
    text = _manifest(project).read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["format"] == cache.FORMAT and set(data["files"]) == {"./model.py"}
    settings = config.Settings(enabled=frozenset({"TL201", "TL401"}), root=str(project))
    findings = engine.lint_text(BAD, "./model.py", settings).findings
    assert any(f.fix is not None for f in findings)
    assert [cache._decode_finding(cache._encode_finding(f)) for f in findings] == findings
    assert [cache._decode_finding(json.loads(json.dumps(cache._encode_finding(f)))) for f in findings] == findings


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_manifest_of_another_user_is_ignored_and_replaced(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    cold = check(*ONLY, ".", cwd=project)
    manifest = _manifest(project)
    os.chown(manifest, 65534, -1)
    assert check(*ONLY, ".", cwd=project) == cold  # checked again, not served
    assert manifest.stat().st_uid == os.geteuid() and manifest.stat().st_mode & 0o777 == 0o600
    assert check(*ONLY, ".", cwd=project) == (cold[0], [])


def _settings(**changes) -> config.Settings:
    return config.Settings(**{"enabled": frozenset({"TL201"}), **changes})


def test_other_run_keys_the_old_layout_and_unused_entries_are_pruned(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    now = time.time()
    recent = [folder / f"{i:032x}.json" for i in range(1, cache.KEEP_OTHER_RUNS + 3)]
    for age, path in enumerate(recent):
        path.write_text("{}", encoding="utf-8")
        os.utime(path, (now - age, now - age))
    stale = folder / ("f" * 32 + ".json")
    stale.write_text("{}", encoding="utf-8")
    os.utime(stale, (now - 8 * 86400, now - 8 * 86400))
    old_entry = folder / ("a" * 32) / "ab" / ("c" * 40)
    old_entry.parent.mkdir(parents=True)
    old_entry.write_bytes(b"pickle")
    unrelated = folder / "notes.txt"
    unrelated.write_text("mine", encoding="utf-8")
    other_folder = folder / ("b" * 32)
    other_folder.mkdir()
    (other_folder / "keep.txt").write_text("not an entry", encoding="utf-8")

    source = tmp_path / "model.py"
    source.write_text(BAD, encoding="utf-8")
    gone = tmp_path / "gone.py"
    gone.write_text(CLEAN, encoding="utf-8")
    run = Cache(str(folder), _settings(), version="1.0", code="a")
    run.store(str(source), runner.file_digest(str(source)), [], [])
    run.store(str(gone), runner.file_digest(str(gone)), [], [])
    run._entries[str(gone)][cache._USED] -= cache.KEEP_ENTRY_DAYS + 1
    run.save()

    left = sorted(p.name for p in folder.glob("*.json"))
    assert left == sorted([run.run_key + ".json", os.path.basename(run.catalog_path)] + [p.name for p in recent[: cache.KEEP_OTHER_RUNS]])
    assert not (folder / ("a" * 32)).exists()
    assert unrelated.exists() and (other_folder / "keep.txt").exists()
    assert set(json.loads((folder / (run.run_key + ".json")).read_text(encoding="utf-8"))["files"]) == {str(source)}
    assert Cache(str(folder), _settings(), version="1.0", code="a").load(str(source)) == ([], [])


def test_a_warm_run_that_changes_nothing_writes_nothing(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    check(*ONLY, ".", cwd=project)
    manifest = _manifest(project)
    before = manifest.stat().st_mtime_ns
    _age_entries(project, 60)
    written = manifest.stat().st_mtime_ns
    check(*ONLY, ".", cwd=project)
    assert manifest.stat().st_mtime_ns == written and written >= before


WARM_RUN_IMPORTS = """
import json, sys
from torchlint import cache, cli
# Pinned: an edit to the package between two runs of a test (a colleague's, in a shared tree) would make
# the second run cold for a reason that is not the one tested.
cache.code_fingerprint = lambda: "pinned"
code = cli.main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m == "libcst" or m.startswith("torchlint.rules.") or m == "torchlint.engine")
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _run_fresh(project: Path, *args: str):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", WARM_RUN_IMPORTS, "check", "--output-format", "json", "--jobs", "1", *args],
                          cwd=str(project), capture_output=True, text=True, timeout=300)
    status = json.loads(proc.stderr.strip().splitlines()[-1])
    return proc.stdout, status["code"], status["heavy"]


def test_a_warm_run_imports_neither_libcst_nor_the_rules(project):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    (project / "clean.py").write_text(CLEAN, encoding="utf-8")
    for selection in (("--select", "ALL"), ("--select", "log-of-softmax,TL4", "--ignore", "TL402"), ("--select", "TL2")):
        cold, cold_code, cold_heavy = _run_fresh(project, *selection, ".")
        assert "libcst" in cold_heavy
        warm, warm_code, warm_heavy = _run_fresh(project, *selection, ".")
        assert (warm, warm_code) == (cold, cold_code) and warm_heavy == [], selection
    # A file that changed is checked: then the rules are imported, and the report is the cold one.
    (project / "clean.py").write_text(CLEAN + "\n", encoding="utf-8")
    again, _, heavy = _run_fresh(project, "--select", "TL2", ".")
    assert again == cold and "libcst" in heavy


def test_a_broken_rule_catalog_is_ignored(project):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    cold = _run_fresh(project, "--select", "TL2", ".")
    (catalog,) = (project / ".torchlint_cache").glob("rules-*.json")
    for garbage in ("", "[]", '{"format": 2, "code": "other", "rules": []}', json.dumps({**json.loads(catalog.read_text(encoding="utf-8")), "rules": 3})):
        catalog.write_text(garbage, encoding="utf-8")
        catalog.chmod(0o600)
        out, code, heavy = _run_fresh(project, "--select", "TL2", ".")
        assert (out, code) == cold[:2] and "libcst" in heavy, garbage
    # rewritten by the last run: the next one needs no rule
    assert _run_fresh(project, "--select", "TL2", ".")[2] == []


def test_selectors_resolve_the_same_from_the_catalog():
    from torchlint import registry

    snapshot = dict(registry.catalog())
    assert set(snapshot) == set(registry.all_rules())
    selections = (["ALL"], ["TL2"], ["TL40"], ["log-of-softmax"], ["TL201", "tl4"])
    plain = [registry.expand_selectors(s) for s in selections] + [registry.default_codes()]
    with registry.catalog_snapshot(snapshot):
        assert [registry.expand_selectors(s) for s in selections] + [registry.default_codes()] == plain
        with pytest.raises(registry.UnknownSelector):
            registry.expand_selector("no-such-rule")


def test_internal_errors_are_cached_unless_they_depend_on_the_process(tmp_path):
    from torchlint.rule import Diagnostic

    source = tmp_path / "model.py"
    source.write_text(BAD, encoding="utf-8")
    digest = runner.file_digest(str(source))
    cases = {
        "fix": Diagnostic(str(source), "internal error building the fix for TL302: ValueError: no; the finding is reported without a fix", 3, 1, "internal"),
        "crash": Diagnostic(str(source), "internal error in TL999: KeyError: 'x'; please report it", 1, 1, "internal"),
        "recursion": Diagnostic(str(source), "internal error: RecursionError: maximum recursion depth exceeded; please report it", kind="internal"),
        "memory": Diagnostic(str(source), "internal error in TL101: MemoryError: ; please report it", kind="internal"),
        "read": Diagnostic(str(source), "cannot read file: denied", kind="io"),
    }
    for name, diagnostic in cases.items():
        folder = tmp_path / name
        run = Cache(str(folder), _settings(), version="1.0", code="a")
        run.store(str(source), digest, [], [diagnostic])
        run.save()
        served = Cache(str(folder), _settings(), version="1.0", code="a").load(str(source))
        assert served == (([], [diagnostic]) if name in ("fix", "crash") else None), name
