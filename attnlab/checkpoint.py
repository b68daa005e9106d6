"""Checkpoints: tensors and plain Python values only, loadable with ``weights_only=True``.

A checkpoint holds the model, optimiser, scheduler, step, RNG states and the run's config
as a plain dict, so a reader can be rebuilt from the file alone and loading a checkpoint
someone sent you never runs code from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from attnlab.config import ExperimentConfig, Reader
from attnlab.errors import UserError
from attnlab.io import atomic_write
from attnlab.models.readers import BaseReader, build_reader

FORMAT = 1


def save(path: Path, payload: dict[str, Any]) -> Path:
    return atomic_write(path, lambda p: torch.save({"format": FORMAT, **payload}, p))


def load(path: Path | str, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint file; any problem is one clear UserError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated, corrupt, or not a torch file at all
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: not a readable attnlab checkpoint ({reason[:160]})") from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT or "model" not in ckpt:
        raise UserError(f"{path}: not an attnlab checkpoint (format {FORMAT} expected)")
    return ckpt


def config_of(ckpt: dict[str, Any]) -> ExperimentConfig:
    """The run's config from a checkpoint, validated against the schema."""
    schema = OmegaConf.structured(ExperimentConfig)
    try:
        return OmegaConf.merge(schema, ckpt["config"])  # type: ignore[return-value]
    except Exception as err:
        raise UserError(f"checkpoint config does not fit this attnlab version: {err}") from err


def restore_reader(ckpt: dict[str, Any], path: Path | str) -> tuple[BaseReader, ExperimentConfig]:
    """Rebuild the reader a checkpoint was trained as and load its weights."""
    cfg = config_of(ckpt)
    reader = build_reader(cfg.model, cfg.data.height)
    load_weights(reader, ckpt, path)
    reader.eval()
    return reader, cfg


def load_weights(reader: BaseReader, ckpt: dict[str, Any], path: Path | str) -> None:
    kind = ckpt.get("reader")
    if kind != Reader(reader.kind).value:
        raise UserError(
            f"{path}: checkpoint holds a {kind} reader, the config asks for {reader.kind.value}"
        )
    try:
        reader.load_state_dict(ckpt["model"])
    except RuntimeError as err:
        first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
        raise UserError(f"{path}: checkpoint does not fit the configured model ({first})") from err


def resolve(run_or_ckpt: Path | str, which: str = "best") -> Path:
    """A run directory (-> checkpoints/<which>.pt) or a checkpoint file."""
    p = Path(run_or_ckpt)
    if p.is_dir():
        ckpt = p / "checkpoints" / f"{which}.pt"
        if not ckpt.is_file():
            raise UserError(f"{p}: no checkpoints/{which}.pt (is it a finished attnlab run?)")
        return ckpt
    if not p.exists():
        raise UserError(f"no such run directory or checkpoint: {p}")
    return p
