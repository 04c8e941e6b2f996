"""How long `torchlint server` takes from a change of a document to its diagnostics.

    python bench/server_latency.py [--corpus DIR] [--edits 20] [--notebook] [FILE ...]

A client (pygls's) starts the server over stdio, opens each FILE and sends
``--edits`` changes of the whole text, one at a time: a line with a TL201 finding
inserted before the top-level statement nearest the middle of the file, then removed
again.  The time of an edit runs from sending ``textDocument/didChange`` to receiving
the ``publishDiagnostics`` of that version (which must show the inserted finding
come and go).  Beside it, the engine's own ``lint_text`` time on the same texts, in
this process: the difference is the server's (debounce, protocol, positions).

``--notebook``: each FILE is opened as a Jupyter notebook instead (LSP 3.17
``notebookDocument/didOpen``), a code cell per top-level statement group as
``bench/notebook_speed.py`` splits it; the probe comes and goes at the start of the
middle cell (``notebookDocument/didChange`` of that cell's text), the time runs to that
cell's diagnostics, and the engine's column is ``notebook.check`` on the same cells.

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
from notebook_speed import cell_ranges  # noqa: E402
from torchlint import config, engine, notebook  # noqa: E402
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


def cells_of(text: str) -> List[str]:
    """The code cells ``text`` makes as a notebook (see bench/notebook_speed.py)."""
    lines = text.splitlines(keepends=True)
    return ["".join(lines[start:end]).rstrip("\n") for start, end in cell_ranges(text)]


def edited_texts(path: Path, as_notebook: bool) -> Tuple[List[str], List[str], int]:
    """The documents' texts as opened (the file, or its cells), the two texts the edits alternate
    between, and which document they change."""
    original = path.read_text(encoding="utf-8")
    if not as_notebook:
        return [original], [probed(original), original], 0
    cells = cells_of(original)
    middle = len(cells) // 2
    return cells, [PROBE + cells[middle], cells[middle]], middle


async def measure(path: Path, edits: int, as_notebook: bool = False) -> Tuple[List[float], int]:
    """Seconds from each didChange to its diagnostics, and how many of them showed the probe as expected."""
    client = LanguageClient("torchlint-bench", "1")
    published: "asyncio.Queue[Tuple[types.PublishDiagnosticsParams, float]]" = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait((params, time.perf_counter()))

    await client.start_io(sys.executable, "-m", "torchlint", "server")
    root = path.parent
    capabilities = types.ClientCapabilities()
    if as_notebook:
        capabilities.notebook_document = types.NotebookDocumentClientCapabilities(types.NotebookDocumentSyncClientCapabilities())
    await client.initialize_async(types.InitializeParams(capabilities=capabilities, root_uri=root.as_uri()))
    client.initialized(types.InitializedParams())
    opened, texts, edited = edited_texts(path, as_notebook)
    if as_notebook:
        notebook_uri = path.with_suffix(".ipynb").as_uri()
        uris = [f"vscode-notebook-cell:{path.with_suffix('.ipynb').as_posix()}#{number}" for number in range(len(opened))]
        cells = [types.NotebookCell(types.NotebookCellKind.Code, uri) for uri in uris]
        client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                types.NotebookDocument(notebook_uri, "jupyter-notebook", 0, cells),
                [types.TextDocumentItem(uri, "python", 0, text) for uri, text in zip(uris, opened)],
            )
        )
    else:
        uris = [path.as_uri()]
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uris[0], "python", 0, opened[0])))
    uri = uris[edited]

    def change(version: int, text: str) -> None:
        document = types.VersionedTextDocumentIdentifier(version=version, uri=uri)
        whole = [types.TextDocumentContentChangeWholeDocument(text)]
        if as_notebook:
            content = types.NotebookDocumentCellContentChanges(document, whole)
            client.notebook_document_did_change(
                types.DidChangeNotebookDocumentParams(
                    types.VersionedNotebookDocumentIdentifier(version=version, uri=notebook_uri),
                    types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[content])),
                )
            )
        else:
            client.text_document_did_change(types.DidChangeTextDocumentParams(document, whole))

    async def diagnostics_of(version: int) -> Tuple[types.PublishDiagnosticsParams, float]:
        while True:
            params, received = await asyncio.wait_for(published.get(), 120)
            if params.uri == uri and params.version == version:
                return params, received

    baseline = len((await diagnostics_of(0))[0].diagnostics)
    latencies, right = [], 0
    for version in range(1, edits + 1):
        text = texts[(version - 1) % 2]
        await asyncio.sleep(0.2)  # an edit at a time, as after a pause in typing
        sent = time.perf_counter()
        change(version, text)
        params, received = await diagnostics_of(version)
        latencies.append(received - sent)
        right += len(params.diagnostics) == baseline + (1 if text is texts[0] else 0)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies, right


def engine_times(path: Path, edits: int, as_notebook: bool = False) -> List[float]:
    """Seconds of ``engine.lint_text`` (``notebook.check``) on each text the edits send, in the same order, in this process."""
    settings = config.resolve(config.locate([str(path)]), config.Overrides())
    opened, texts, edited = edited_texts(path, as_notebook)
    times = []
    for number in range(edits):
        text = texts[number % 2]
        start = time.perf_counter()
        if as_notebook:
            cells = [notebook.Cell("code", text if index == edited else source) for index, source in enumerate(opened)]
            notebook.check(notebook.Notebook(cells), str(path.with_suffix(".ipynb")), settings)
        else:
            engine.lint_text(text, str(path), settings)
        times.append(time.perf_counter() - start)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("TORCHLINT_CORPUS", default_dest())))
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--notebook", action="store_true", help="open each file as a notebook of cells and edit its middle cell")
    args = parser.parse_args(argv)
    files = args.files or default_files(args.corpus)
    if not files:
        print(f"no model files of 1,950-2,050 lines under {args.corpus}: run bench/corpus.py first, or name files", file=sys.stderr)
        return 2
    engine.lint_text("import torch\n", "warm.py", config.resolve(None, config.Overrides()))  # import the rules once
    print(f"debounce {DEBOUNCE_SECONDS * 1000:.0f} ms, {args.edits} edits per file, {os.cpu_count()} CPUs\n")
    alone_name = "notebook.check" if args.notebook else "engine lint_text"
    print(f"| file | lines | didChange to diagnostics, median (min-max) | {alone_name}, median | diagnostics right |")
    print("|---|---:|---:|---:|---:|")
    every, engine_every = [], []
    for path in files:
        latencies, right = asyncio.run(measure(path, args.edits, args.notebook))
        alone = engine_times(path, args.edits, args.notebook)
        every.extend(latencies)
        engine_every.extend(alone)
        lines = path.read_bytes().count(b"\n")
        name = os.path.relpath(path, args.corpus) if args.corpus in path.parents else str(path)
        print(
            f"| {name} | {lines} | {statistics.median(latencies) * 1000:.0f} ms ({min(latencies) * 1000:.0f}-{max(latencies) * 1000:.0f}) "
            f"| {statistics.median(alone) * 1000:.0f} ms | {right}/{len(latencies)} |",
            flush=True,
        )
    print(f"\nall {len(every)} edits: median {statistics.median(every) * 1000:.0f} ms; {alone_name} alone: median {statistics.median(engine_every) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
