"""How long `torchlint server` takes from a change of a document to its diagnostics.

    python bench/server_latency.py [--corpus DIR] [--edits 20] [FILE ...]

A client (pygls's) starts the server over stdio, opens each FILE and sends
``--edits`` changes of the whole text, one at a time: a line with a TL201 finding
inserted before the top-level statement nearest the middle of the file, then removed
again.  The time of an edit runs from sending ``textDocument/didChange`` to receiving
the ``publishDiagnostics`` of that version (which must show the inserted finding
come and go).  Beside it, the engine's own ``lint_text`` time on the same texts, in
this process: the difference is the server's (debounce, protocol, positions).

Without FILE: every model file of 1,950 to 2,050 lines of transformers, timm and
diffusers in the corpus made by `bench/corpus.py`.  Medians over one run on one
machine; not a test.
"""
from __future__ import annotations

import argparse
import ast
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from corpus import default_dest  # noqa: E402
from torchlint import config, engine  # noqa: E402
from torchlint.server.language_server import DEBOUNCE_SECONDS  # noqa: E402

PROBE = "_probe = torch.log(torch.softmax(torch.ones(3), dim=-1))\n\n\n"
MODEL_DIRECTORIES = ("transformers", "timm", "diffusers")


def default_files(corpus: Path) -> List[Path]:
    found = []
    for package in MODEL_DIRECTORIES:
        for path in sorted((corpus / package).rglob("*.py")):
            if "models" in path.parts:
                lines = path.read_bytes().count(b"\n")
                if 1950 <= lines <= 2050:
                    found.append(path)
    return found


def probed(text: str) -> str:
    """``text`` with the probe inserted before the top-level statement nearest its middle."""
    body = ast.parse(text).body
    middle = text.count("\n") // 2
    statement = min(body[1:], key=lambda s: abs(s.lineno - middle))
    first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
    lines = text.splitlines(keepends=True)
    return "".join(lines[: first - 1]) + PROBE + "".join(lines[first - 1 :])


async def measure(path: Path, edits: int) -> Tuple[List[float], int]:
    """Seconds from each didChange to its diagnostics, and how many of them showed the probe as expected."""
    client = LanguageClient("torchlint-bench", "1")
    published: "asyncio.Queue[Tuple[types.PublishDiagnosticsParams, float]]" = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait((params, time.perf_counter()))

    await client.start_io(sys.executable, "-m", "torchlint", "server")
    root = path.parent
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=root.as_uri()))
    client.initialized(types.InitializedParams())
    uri = path.as_uri()
    original = path.read_text(encoding="utf-8")
    texts = [probed(original), original]
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 0, original)))

    async def diagnostics_of(version: int) -> Tuple[types.PublishDiagnosticsParams, float]:
        while True:
            params, received = await asyncio.wait_for(published.get(), 120)
            if params.version == version:
                return params, received

    baseline = len((await diagnostics_of(0))[0].diagnostics)
    latencies, right = [], 0
    for version in range(1, edits + 1):
        text = texts[(version - 1) % 2]
        await asyncio.sleep(0.2)  # an edit at a time, as after a pause in typing
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=uri), [types.TextDocumentContentChangeWholeDocument(text)]
            )
        )
        params, received = await diagnostics_of(version)
        latencies.append(received - sent)
        right += len(params.diagnostics) == baseline + (1 if text is texts[0] else 0)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies, right


def engine_times(path: Path, edits: int) -> List[float]:
    """Seconds of ``engine.lint_text`` on each text the edits send, in the same order, in this process."""
    settings = config.resolve(config.locate([str(path)]), config.Overrides())
    original = path.read_text(encoding="utf-8")
    texts = [probed(original), original]
    times = []
    for number in range(edits):
        start = time.perf_counter()
        engine.lint_text(texts[number % 2], str(path), settings)
        times.append(time.perf_counter() - start)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("TORCHLINT_CORPUS", default_dest())))
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args(argv)
    files = args.files or default_files(args.corpus)
    if not files:
        print(f"no model files of 1,950-2,050 lines under {args.corpus}: run bench/corpus.py first, or name files", file=sys.stderr)
        return 2
    engine.lint_text("import torch\n", "warm.py", config.resolve(None, config.Overrides()))  # import the rules once
    print(f"debounce {DEBOUNCE_SECONDS * 1000:.0f} ms, {args.edits} edits per file, {os.cpu_count()} CPUs\n")
    print("| file | lines | didChange to diagnostics, median (min-max) | engine lint_text, median | diagnostics right |")
    print("|---|---:|---:|---:|---:|")
    every, engine_every = [], []
    for path in files:
        latencies, right = asyncio.run(measure(path, args.edits))
        alone = engine_times(path, args.edits)
        every.extend(latencies)
        engine_every.extend(alone)
        lines = path.read_bytes().count(b"\n")
        name = os.path.relpath(path, args.corpus) if args.corpus in path.parents else str(path)
        print(
            f"| {name} | {lines} | {statistics.median(latencies) * 1000:.0f} ms ({min(latencies) * 1000:.0f}-{max(latencies) * 1000:.0f}) "
            f"| {statistics.median(alone) * 1000:.0f} ms | {right}/{len(latencies)} |",
            flush=True,
        )
    print(f"\nall {len(every)} edits: median {statistics.median(every) * 1000:.0f} ms; engine alone: median {statistics.median(engine_every) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
