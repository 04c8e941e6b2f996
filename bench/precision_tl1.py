"""Precision of TL101-TL107 on real code: list the findings and a deterministic sample to read.

    python bench/precision_tl1.py [--corpus DIR] [--packages timm,kornia,...] [--codes TL101,...]
                                  [--sample 60] [--seed 101]

The corpus is the one ``bench/corpus.py`` assembles (the wheels' Python
sources of well-known PyTorch libraries, outside the repository; DIR defaults
to $TORCHLINT_CORPUS or ~/.cache/torchlint-corpus; rebuild it with
``python bench/corpus.py --set small``).  Every finding of ``--codes``
(default TL101-TL107, the domain-guard family) is
counted per rule; then ``--sample`` of them are drawn with a fixed seed
(sorted by path, line, column and code first, so the draw is the same on every
machine) and printed with five lines of context each, numbered, for a person
to read and judge.  The verdicts live in ``bench/results/precision_tl1.md``;
this script only measures and samples, it never judges.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torchlint import config, engine  # noqa: E402

CODES = ("TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL107")
DEFAULT_PACKAGES = (
    "timm", "torchmetrics", "kornia", "peft", "accelerate", "pytorch-lightning", "sentence-transformers", "einops",
)


def default_corpus() -> Path:
    return Path(os.environ.get("TORCHLINT_CORPUS", Path.home() / ".cache" / "torchlint-corpus"))


def python_files(root: Path):
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(directory) / name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--packages", default=",".join(DEFAULT_PACKAGES))
    parser.add_argument("--codes", default=",".join(CODES))
    parser.add_argument("--sample", type=int, default=60)
    parser.add_argument("--seed", type=int, default=101)
    args = parser.parse_args()

    codes = tuple(code.strip() for code in args.codes.split(",") if code.strip())
    settings = config.Settings(enabled=frozenset(codes))
    findings = []
    files = lines = 0
    started = time.perf_counter()
    for package in args.packages.split(","):
        root = args.corpus / package
        if not root.is_dir():
            print(f"missing package {root}: run bench/corpus.py first", file=sys.stderr)
            return 2
        for path in python_files(root):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            files += 1
            lines += text.count("\n")
            result = engine.lint_text(text, str(path.relative_to(args.corpus)), settings)
            source_lines = text.splitlines()
            for finding in result.findings:
                findings.append((finding, source_lines))
    elapsed = time.perf_counter() - started
    findings.sort(key=lambda item: item[0].sort_key)

    counts = Counter(finding.code for finding, _ in findings)
    print(f"# {len(findings)} findings in {files} files, {lines} lines ({elapsed:.0f} s): "
          + ", ".join(f"{code} {counts[code]}" for code in codes))
    sample = sorted(random.Random(args.seed).sample(range(len(findings)), min(args.sample, len(findings))))
    for number, index in enumerate(sample, start=1):
        finding, source_lines = findings[index]
        line = finding.location.line
        print(f"\n## {number}. {finding.code} {finding.path}:{line}:{finding.location.column}")
        for current in range(max(1, line - 5), min(len(source_lines), line + 2) + 1):
            marker = ">>" if current == line else "  "
            print(f"{marker}{current:5d} | {source_lines[current - 1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
