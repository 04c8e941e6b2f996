"""Assemble a body of real PyTorch code from the package registry, outside the repository.

    python bench/corpus.py [--dest DIR] [--set small|full|training|recipes|all]

Downloads the wheels (sdists where no wheel exists) of well-known PyTorch
libraries with `pip download --no-deps`, unpacks only their Python sources
into DEST/<package>/, and prints the file and line counts.  Nothing here is
ever committed; DEST defaults to $TORCHLINT_CORPUS or ~/.cache/torchlint-corpus.
Re-running skips packages already unpacked.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# Pinned so that every run measures the same code.
SMALL = [
    "timm==1.0.31",
    "torchmetrics==1.9.0",
    "kornia==0.9.0",
    "peft==0.21.2",
    "accelerate==1.15.0",
    "pytorch-lightning==2.6.6",
    "sentence-transformers==6.2.0",
    "einops==0.8.2",
]
FULL = SMALL + [
    "transformers==5.23.0",
    "diffusers==0.42.1",
    "monai==1.6.1",
    "speechbrain==1.1.2",
    "torch-geometric==2.8.1",
    "ultralytics==8.4.190",
    "fairseq==0.12.2",
]
# Libraries of losses and training code: what the TL1xx rules are for, measured apart from FULL.
TRAINING = [
    "lightly==1.6.0",
    "pytorch-forecasting==1.8.0",
    "pytorch-metric-learning==2.9.0",
    "pytorch-toolbelt==0.8.0",
    "segmentation-models-pytorch==0.6.0",
    "catalyst==22.4",
    "info-nce-pytorch==0.1.4",
    "lightning-bolts==0.7.0",
    "mmdet==3.3.0",
    "mmsegmentation==1.2.2",
    "pytorch-msssim==1.0.0",
    "torchvision==0.28.0",
    "asteroid==0.7.0",
    "auraloss==0.4.0",
    "geomloss==0.3.1",
    "piq==0.8.0",
    "mmocr==1.0.1",
    "mmpose==1.3.2",
    "mmpretrain==1.2.0",
]
# Trainers and training recipes: the code closest to a user's own training script.
RECIPES = [
    "trl==1.16.0",
    "torchtune==0.6.1",
    "yolov5==7.0.14",
    "pytorch-tabnet==4.1.0",
    "pykeen==1.11.1",
    "flair==0.15.1",
    "litgpt==0.5.13",
    "mosaicml==0.32.1",
    "torchrl==0.14.1",
]
SETS = {"small": SMALL, "full": FULL, "training": TRAINING, "recipes": RECIPES, "all": FULL + TRAINING + RECIPES}


def default_dest() -> Path:
    return Path(os.environ.get("TORCHLINT_CORPUS", Path.home() / ".cache" / "torchlint-corpus"))


def _unpack(archive: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith(".py") and ".." not in name.split("/"):
                    out = target / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(zf.read(name))
    else:
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                if member.isfile() and member.name.endswith(".py") and ".." not in member.name.split("/"):
                    out = target / member.name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    source = tf.extractfile(member)
                    if source is not None:
                        out.write_bytes(source.read())


def fetch(requirement: str, dest: Path) -> Path:
    name = requirement.split("==")[0]
    target = dest / name
    if (target / ".complete").exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, requirement],
            check=True,
        )
        for archive in Path(tmp).iterdir():
            _unpack(archive, target)
    (target / ".complete").write_text(requirement + "\n")
    return target


def count(dest: Path) -> tuple:
    files = lines = 0
    for path in dest.rglob("*.py"):
        files += 1
        with open(path, "rb") as handle:
            lines += handle.read().count(b"\n")
    return files, lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=default_dest())
    parser.add_argument("--set", choices=tuple(SETS), default="full")
    args = parser.parse_args(argv)
    for requirement in SETS[args.set]:
        try:
            target = fetch(requirement, args.dest)
        except subprocess.CalledProcessError as exc:
            print(f"skipped {requirement}: pip download failed ({exc.returncode})", file=sys.stderr)
            continue
        files, lines = count(target)
        print(f"{requirement:<32} {files:>6} files {lines:>9} lines")
    files, lines = count(args.dest)
    print(f"{'total':<32} {files:>6} files {lines:>9} lines  ({args.dest})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
