"""An export as attnlab's evaluation sees a reader, so that ``attnlab eval RUN --onnx OUT``
reads the run's evaluation sets through the reference loop and writes the same files."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from attnlab.errors import UserError
from attnlab.export.runtime import Export
from attnlab.export.sidecar import sha256
from attnlab.models.base import Decoded


class OnnxReader:
    """``read`` runs the export; no teacher forcing (``digit_probs``) and no per-head maps."""

    def __init__(self, export: Export):
        self.export = export
        self.name = export.meta["reader"]
        self.charset = export.charset
        self.encoder = SimpleNamespace(stride=export.meta["stride"])
        self.ATTENTION = _attends(self.name)  # as the exported reader's weights are

    def eval(self) -> OnnxReader:
        return self

    def read(self, images, widths, beam: int = 1, lengths=None) -> Decoded:
        if lengths is not None:
            raise UserError("eval.oracle_length: the ONNX reference loop has no oracle lengths")
        r = self.export.read_batch(images.cpu().numpy(), widths.cpu().numpy(), beam)
        weights = None if r.weights is None else torch.from_numpy(r.weights.astype(np.float32))
        return Decoded(
            r.texts,
            torch.from_numpy(np.asarray(r.confidence, dtype=np.float32)),
            weights,
            torch.from_numpy(r.columns),
            torch.from_numpy(np.asarray(r.score, dtype=np.float32)),
        )

    def digit_probs(self, images, widths, texts):
        raise NotImplementedError

    def head_weights(self, images, widths, texts):
        return None


def _attends(reader: str) -> bool:
    """Whether the weights of the reader of this name are an attention (``Reader.ATTENTION``)."""
    from attnlab.models import registry

    try:
        return bool(registry.get(reader).reader.ATTENTION)
    except UserError:  # a reader this process does not know: its weights taken as attention
        return True


def onnx_reader(folder: Path | str, ckpt_path: Path) -> OnnxReader:
    """The export in ``folder`` as a reader, refused unless it was made from ``ckpt_path``
    (the same bytes): an export of another run or checkpoint is not this run's evaluation.
    The proof: ``Export`` has checked that every graph's metadata names the sidecar's
    checkpoint sha256 (``sidecar.BOUND``), and that sha256 must be this checkpoint's."""
    export = Export(folder, threads=torch.get_num_threads())
    source = export.meta["source"]
    now = sha256(Path(ckpt_path).read_bytes())
    if source["checkpoint_sha256"] != now:
        why = _not_from(source, Path(ckpt_path), now)
        raise UserError(f"--onnx {folder}: {why}; export this run again (attnlab export)")
    return OnnxReader(export)


def _not_from(source: dict, ckpt_path: Path, now: str) -> str:
    """Why an export is not of ``ckpt_path``: another file's, or this file's as it was."""
    was = Path(source["checkpoint"])
    at = f"at step {source['step']}"
    if was.resolve() != ckpt_path.resolve():
        return f"exported from {was} ({at}), not from {ckpt_path}"
    return (
        f"exported from {was} {at} (sha256 {source['checkpoint_sha256'][:12]}), which has "
        f"changed since (now sha256 {now[:12]}: trained on or replaced)"
    )
