"""``attnlab export RUN OUT``: the run's reader as ONNX graphs, a JSON sidecar and the parity
check's figures, written whole (``atomic_dir``) and only when the check passes.

OUT holds ``encoder.onnx`` and ``step.onnx`` (a step-wise reader) or ``ctc.onnx``, the
sidecar ``attnlab-onnx.json`` (charset, height, token ids, decoding settings, opset, each
graph's sha256 and inputs/outputs, the checkpoint it came from, the pixel contract) and
``parity.json``. Each graph's ONNX metadata repeats the checkpoint's sha256, the reader, its
kind, charset, height and stride (``sidecar.BOUND``): the reference loop refuses graphs whose
metadata differ from their sidecar's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from attnlab.config import RunTaskConfig
from attnlab.data import pixels
from attnlab.data.strips import StripSynth
from attnlab.errors import UserError
from attnlab.export import graphs, parity
from attnlab.export.runtime import Export
from attnlab.export.sidecar import (
    FORMAT,
    FORMAT_VERSION,
    OPSET,
    PARITY,
    SIDECAR,
    TOKENS,
    bound,
    check_meta,
    require_extra,
    sha256,
)
from attnlab.io import write_json
from attnlab.io.folders import atomic_dir
from attnlab.models.readers.ctc import CTCReader
from attnlab.runs import locate
from attnlab.runs.restore import restore

FORMATS = ("onnx",)
# A test hook: called with the written folder after the graphs, before the parity check
# (tests/test_export.py corrupts a weight there to see the check refuse the export).
BeforeCheck = Callable[[Path], None]


def export_run(
    run: Path | str,
    out: Path | str,
    fmt: str = "onnx",
    which: str = "best",
    atol: float = 1e-4,
    say: Callable[[str], None] = print,
    before_check: BeforeCheck | None = None,
    per_length: int = parity.PER_LENGTH,
) -> Path:
    """Export the run's ``which`` checkpoint into ``out``; returns ``out``. Everything that
    is refused (a format, a reader, a folder that is not an earlier export, a failed parity
    check) is one UserError line, and then ``out`` is as it was. ``per_length``: the parity
    check's strips of each length (tests of untrained readers use fewer)."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: not a known format (known: {', '.join(FORMATS)})")
    if not (atol >= 0):
        raise UserError(f"--atol {atol}: must be >= 0")
    RunTaskConfig.check_run(which, "cpu")
    require_extra()
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / SIDECAR).exists())):
        raise UserError(f"{out}: exists and is not an attnlab export; choose a new folder")
    with locate.held(run, which, "export") as ckpt_path:
        got = restore(ckpt_path, "cpu")
        why = graphs.refusal(got.reader)
        if why:
            raise UserError(why)
        data = got.config.data
        source = {
            "checkpoint": str(ckpt_path),
            "checkpoint_sha256": sha256(ckpt_path.read_bytes()),
            "step": int(got.ckpt.step),
            "which": which,
        }

        def write(folder: Path) -> None:
            write_graphs(got.reader, str(data.charset), int(data.height), source, folder)
            if before_check is not None:
                before_check(folder)
            model = Export(folder, threads=torch.get_num_threads())
            figures = parity.check(got.reader, StripSynth(data), model, atol, per_length)
            write_json(folder / PARITY, figures)
            say(
                f"parity: {figures['readings_compared']} readings identical in "
                f"{figures['cases']} cases (lengths 1-16, batch 1 and 64, wider, stretched "
                f"and blank strips), logits within {figures['max_logit_diff']:.2g} (atol "
                f"{atol:g}), confidences within {figures['max_confidence_diff']:.2g} (atol "
                f"{figures['confidence_atol']:g})"
            )

        final = atomic_dir(out, write)
    say(f"export written to {final}")
    return final


def write_graphs(reader, charset: str, height: int, source: dict, folder: Path) -> dict:
    """The reader's graphs and sidecar in ``folder``, each graph tied to the sidecar and
    ``source`` (its metadata: ``sidecar.BOUND``); returns the sidecar's content."""
    part = graphs.export_graphs(reader, height, folder)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "reader": reader.name,
        "kind": part["kind"],
        "charset": charset,
        "height": height,
        "stride": int(reader.encoder.stride),
        "tokens": TOKENS,
        "decoding": {
            "step_limit": "one step per encoder column, then EOS",
            "beam_alpha": 1.0,
            "ctc_blank": "the last class" if isinstance(reader, CTCReader) else "",
        },
        "opset": OPSET,
        "graphs": {},
        "source": source,
        "pixels": pixels.CONTRACT,
        **(
            {"memory": part["memory"], "weights": part["weights"]}
            if part["kind"] == "stepwise"
            else {}
        ),
    }
    for name, entry in part["graphs"].items():
        graphs.tie(folder / entry["file"], bound(meta))
        blob = (folder / entry["file"]).read_bytes()
        meta["graphs"][name] = {**entry, "inputs": _graph_inputs(blob), "sha256": sha256(blob)}
    check_meta(meta, SIDECAR)
    write_json(folder / SIDECAR, meta)
    return meta


def _graph_inputs(blob: bytes) -> list[str]:
    """The graph's inputs as the exporter left them (it drops inputs a graph never reads)."""
    import onnx

    graph = onnx.load_model_from_string(blob).graph
    weights = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in weights]
