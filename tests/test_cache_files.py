"""files.discover walks a tree with one scandir per directory and its own exclude matcher: same files, same order.

The reference is the straightforward walk (os.walk plus Settings.is_excluded
and os.path.realpath for every path) that discover replaced because it cost
3 s over an 8,000-file corpus, more than the rest of a warm cached run.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Sequence

import pytest

from torchlint import config, files


def reference_discover(paths: Sequence[str], settings: config.Settings) -> List[str]:
    found: List[str] = []
    seen = set()
    for path in paths:
        if os.path.isdir(path):
            candidates = []
            for directory, subdirs, names in os.walk(path):
                subdirs[:] = sorted(d for d in subdirs if not settings.is_excluded(os.path.join(directory, d)))
                for name in sorted(names):
                    full = os.path.join(directory, name)
                    if name.endswith(files.CHECKED_SUFFIXES) and not settings.is_excluded(full):
                        candidates.append(full)
        else:
            candidates = [path]
        for file in candidates:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                found.append(file)
    return found


def _tree(root: Path) -> None:
    for relative in [
        "pkg/__init__.py", "pkg/model.py", "pkg/model.pyi", "pkg/notes.txt", "pkg/gen/out_pb2.py", "pkg/gen/keep.py",
        "pkg/build/skip.py", "pkg/sub.egg/x.py", "pkg/.venv/lib.py", "pkg/Build/kept.py", "top.py", "..odd.py",
        "deep/a/b/c/d.py", "deep/a/b/node_modules/n.py", "data/x_pb2.py", "vendor/lib/site-packages/y.py",
    ]:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n", encoding="utf-8")
    os.symlink(root / "pkg" / "model.py", root / "pkg" / "alias.py")
    os.symlink(root / "deep", root / "pkg" / "deep_link")
    os.symlink(root / "missing.py", root / "pkg" / "broken.py")


EXCLUDES = [
    config.DEFAULT_EXCLUDE,
    config.DEFAULT_EXCLUDE + ("*_pb2.py", "pkg/gen", "deep/a/b/"),
    ("*",),
    ("*.py",),
    ("deep",),
    ("pkg/*",),
    ("*/c/*",),
]


@pytest.mark.parametrize("exclude", EXCLUDES)
@pytest.mark.parametrize("root_at", [".", "pkg", "..", "deep/a"])
def test_discover_finds_what_the_plain_walk_finds(tmp_path, exclude, root_at):
    tree = tmp_path / "tree"
    tree.mkdir()
    _tree(tree)
    settings = config.Settings(enabled=frozenset(), exclude=tuple(exclude), root=str((tree / root_at).resolve()))
    here = os.getcwd()
    os.chdir(tree)
    try:
        for paths in (["."], [str(tree)], ["pkg", "deep"], ["pkg/model.py", "pkg"], ["deep/a", "."]):
            assert files.discover(paths, settings)[0] == reference_discover(paths, settings), (paths, exclude, root_at)
    finally:
        os.chdir(here)


def test_the_walk_skips_excluded_folders_without_listing_them(tmp_path, monkeypatch):
    (tmp_path / "node_modules" / "deep").mkdir(parents=True)
    (tmp_path / "node_modules" / "deep" / "x.py").write_text("", encoding="utf-8")
    (tmp_path / "a.py").write_text("", encoding="utf-8")
    listed = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: (listed.append(os.path.basename(os.path.abspath(path))), real_scandir(path))[1])
    settings = config.Settings(enabled=frozenset(), root=str(tmp_path))
    assert files.discover([str(tmp_path)], settings)[0] == [str(tmp_path / "a.py")]
    assert "node_modules" not in listed and "deep" not in listed


def test_the_index_module_map_names_modules_as_module_name_does(tmp_path):
    from torchlint.analysis.model import project_index

    for relative in ["pkg/__init__.py", "pkg/a.py", "pkg/sub/__init__.py", "pkg/sub/b.py", "pkg/nopkg/c.py", "top.py", "__init__.py", "pkg/sub/__init__.pyi"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("", encoding="utf-8")
    settings = config.Settings(enabled=frozenset(), root=str(tmp_path))
    found = files.discover([str(tmp_path)], settings)[0]
    index = project_index.ProjectIndex(found)
    expected = {}
    for path in found:
        if path.endswith(".py"):
            expected.setdefault(project_index.module_name(path), path)
    names = index._ensure()
    assert {name: names[name] for name in expected} == expected
    # A folder without __init__.py inside a package is a namespace package of it (``<root>.pkg.nopkg.c``); its module
    # is also named as a script beside it, or in its folder, imports it, second to the names above.
    assert set(names) - set(expected) == {"c", "nopkg.c"}
    # A script at the top of the root package imports the modules below it without the root's name: aliases,
    # each read as the module it stands for.
    prefix = tmp_path.name + "."
    assert index._aliases == {m: prefix + m for m in ("pkg", "pkg.a", "pkg.sub", "pkg.sub.b", "top", "pkg.nopkg.c")}
    assert index.canonical("pkg.sub.b") == prefix + "pkg.sub.b" and index.is_module("pkg.sub.b")
    # The folder itself holds an __init__.py, so every name starts with its name.
    prefix = tmp_path.name + "."
    assert {prefix + m for m in ("pkg", "pkg.a", "pkg.sub", "pkg.sub.b", "top", "pkg.nopkg.c")} <= set(expected)
