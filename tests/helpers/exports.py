"""Helpers of the ONNX export tests: untrained readers exported as a run's would be, and the
edits a hostile or careless user makes to an export folder (each leaves the sidecar's sha256
of every graph right, so that only the check under test can refuse it)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import onnx

from attnlab.export.exporter import write_graphs
from attnlab.export.sidecar import SIDECAR, sha256


def export_reader(reader, cfg, folder: Path, digest: str = "0" * 64) -> Path:
    """``reader`` (built from the composed ``cfg``) written as an export into ``folder``:
    the exporter's graphs and sidecar, ``digest`` standing for its checkpoint's sha256."""
    folder.mkdir(parents=True)
    source = {"checkpoint": "untrained", "checkpoint_sha256": digest, "step": 0, "which": "best"}
    write_graphs(reader, str(cfg.data.charset), int(cfg.data.height), source, folder)
    return folder


def export_checkpoint(run: Path, which: str, folder: Path) -> Path:
    """The run's ``which`` checkpoint written as ``attnlab export`` writes it (the same
    ``write_graphs`` and source), without the parity check: tests of refusals."""
    from attnlab.runs import locate
    from attnlab.runs.restore import restore

    path = locate.resolve(str(run), which)
    got = restore(path, "cpu")
    folder.mkdir(parents=True)
    source = {
        "checkpoint": str(path),
        "checkpoint_sha256": sha256(path.read_bytes()),
        "step": int(got.ckpt.step),
        "which": which,
    }
    data = got.config.data
    write_graphs(got.reader.eval(), str(data.charset), int(data.height), source, folder)
    return folder


def copy_export(folder: Path, dest: Path) -> Path:
    return Path(shutil.copytree(folder, dest))


def edit_sidecar(folder: Path, edit: Callable[[dict], object]) -> None:
    meta = json.loads((folder / SIDECAR).read_text())
    edit(meta)
    (folder / SIDECAR).write_text(json.dumps(meta))


def put_graph(folder: Path, name: str, data: bytes) -> None:
    """``data`` as the export's graph ``name``, its sha256 recomputed in the sidecar."""
    (folder / f"{name}.onnx").write_bytes(data)
    edit_sidecar(folder, lambda m: m["graphs"][name].update(sha256=sha256(data)))


def forge_metadata(folder: Path, name: str, like: Path) -> None:
    """Give the graph ``name`` the ONNX metadata of the export ``like``'s graph (what a
    forger would copy so that the graph passes for that export's), sha256 recomputed."""
    model = onnx.load(folder / f"{name}.onnx")
    theirs = onnx.load(like / f"{name}.onnx")
    del model.metadata_props[:]
    model.metadata_props.extend(theirs.metadata_props)
    put_graph(folder, name, model.SerializeToString())
