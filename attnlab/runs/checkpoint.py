"""Checkpoints: tensors and plain Python values only, loadable with ``weights_only=True``.

A checkpoint (``Checkpoint``) holds the model, optimiser, scheduler, step, RNG states and the
run's config as plain values, so a reader can be rebuilt from the file alone and loading a
checkpoint someone sent you never runs code from it. Which checkpoint a RUN argument names:
``attnlab.runs.locate``; a checkpoint restored as a working reader: ``attnlab.runs.restore``.

Adding a config field: when its default changes what a run computes, a checkpoint written
before it existed was trained as if it had another value (the feature off). Raise FORMAT by
one and add ``FORMAT: {section: {key: that value}}`` to LEGACY; files of older formats then
read the key as they were trained. A field whose default computes what older runs computed
needs neither. Adding an entry to the payload: a field of ``Checkpoint`` (optional, None
when absent, so older files still load).
"""

from __future__ import annotations

import io
import pickle
import warnings
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from attnlab.config import DataConfig, ExperimentConfig, model_schema
from attnlab.errors import UserError, one_line, with_article
from attnlab.io import write_bytes
from attnlab.models import registry
from attnlab.models.base import Reader

# Format 2: the model config holds the reader's own fields only (format 1 held every
# reader's fields in one flat section; those files are read by dropping the others).
# Format 3: the config has the column convolutions and the glyph stretch and training
# augmentation. Format 4: it has the footless ones. Format 5: the share of training strips
# augmented (every one before). Format 6: training batches of one length (lengths were
# mixed in every batch before), elastic glyph warps and JPEG. Format 7: the step-wise
# readers' auxiliary CTC loss (a key of their sections only). Format 8: train.bf16 null
# means "on CUDA only" and true "on any device" (before, true meant CUDA only: read as null).
# A file of an older format
# lacks the keys added since and was trained without them, so they read as LEGACY says
# (format -> the keys it added, with the values it was trained with), not as today's defaults.
FORMAT = 8
READABLE = (1, 2, 3, 4, 5, 6, 7, 8)
LEGACY: dict[int, dict[str, dict[str, Any]]] = {
    3: {
        "model": {"column_convs": []},
        "data": {
            "stretch": [1.0, 1.0],
            "marked_zeros": 0.0,
            "oldstyle": 0.0,
            "dilate": 0.0,
            "ink_level": [0.0, 0.0],
            "strip_scale": [1.0, 1.0],
            "strip_shift": 0.0,
            "wave": 0.0,
            "resample": [1.0, 1.0],
            "shading": 0.0,
        },
    },
    4: {"data": {"footless_ones": 0.0}},
    5: {"data": {"augmented": 1.0}},
    6: {"data": {"batch_by_length": False, "elastic": 0.0, "jpeg": 0.0}},
    7: {"model": {"ctc_aux": 0.0}},
}


def legacy(section: str, written: int = 0) -> dict[str, Any]:
    """The keys of a config section added after format ``written``, with the values a file
    of that format was trained with (written=0: every key added since the first format)."""
    return {
        key: value
        for added, sections in LEGACY.items()
        if written < added
        for key, value in sections.get(section, {}).items()
    }


@dataclass
class Checkpoint:
    """What a checkpoint file holds, by name: its layout is spelled here and nowhere else.

    ``to_payload`` gives the plain dict ``torch.save`` writes (tensors and plain values, so
    ``weights_only=True`` loads it); ``from_payload`` checks a loaded dict and reads every
    format in READABLE. ``config`` is the run's config as plain values (``plain_config``).
    """

    reader: str | None
    model: dict[str, torch.Tensor]
    config: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    rng: dict[str, Any] | None = None  # {"torch": the global RNG state, "stream": the stream's}
    history: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] = field(default_factory=dict)  # {"step", "exact_acc"} of best.pt
    best_metrics: dict[str, Any] = field(default_factory=dict)
    val: dict[str, Any] = field(default_factory=dict)  # the last validation
    params: int | None = None
    timing: dict[str, Any] = field(default_factory=dict)  # {"train_seconds", "steps"}
    data_split: dict[str, Any] | None = None  # data=folder: what the run holds out
    init_from: dict[str, Any] | None = None  # fine-tuning: the source checkpoint
    drawn_by: dict[str, Any] | None = None  # package versions and glyph bank (runs.drawn)
    # optim.ema: the weights as the optimiser trained them, to resume from; ``model`` then
    # holds their average, the weights the run validated and reads with
    trained: dict[str, torch.Tensor] | None = None
    # data.unlabelled: self-training's rounds and the strips taken (training.selftrain)
    self_training: dict[str, Any] | None = None
    format: int = FORMAT

    def to_payload(self) -> dict[str, Any]:
        """The dict written to disk; optional entries that are None are left out."""
        payload = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in payload.items() if v is not None or k == "reader"}

    @classmethod
    def from_payload(cls, payload: Any, path: Path | str) -> Checkpoint:
        """A loaded dict, checked; any problem is one UserError naming ``path``."""
        if not isinstance(payload, dict) or payload.get("format") not in READABLE:
            raise UserError(
                f"{path}: not an attnlab checkpoint this version reads (format "
                f"{', '.join(map(str, READABLE))} expected, found {_format_of(payload)})"
            )
        for entry in ("model", "trained"):
            weights = payload.get(entry)
            if entry == "trained" and weights is None:
                continue
            if not isinstance(weights, dict) or not all(
                isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in weights.items()
            ):
                raise UserError(f"{path}: its {entry!r} entry is not a mapping of names to tensors")
            check_finite(weights, path)
        for key, kind in (("config", dict), ("reader", str), ("step", int)):
            if payload.get(key) is not None and not isinstance(payload[key], kind):
                raise UserError(
                    f"{path}: its {key!r} entry is {with_article(type(payload[key]).__name__)}"
                )
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in payload.items() if k in known and v is not None}
        return cls(**{"reader": None, **values})

    def save(self, path: Path) -> Path:
        """Written whole or not at all. Serialised in memory first, so that a failed write
        (a full disk) is the OS's error, named as such with the file and the disk
        (``attnlab.io``), not torch's ``[enforce fail at inline_container.cc]``."""
        buffer = io.BytesIO()
        torch.save(self.to_payload(), buffer)
        return write_bytes(path, buffer.getvalue())

    def run_config(self) -> ExperimentConfig:
        """The run's config, validated against the schema of its reader; the keys a file of
        an older format lacks read as LEGACY says (the values it was trained with)."""
        saved = dict(self.config or {})
        if not isinstance(saved.get("model") or {}, dict):
            raise UserError("checkpoint config: model is not a mapping")
        name = str((saved.get("model") or {}).get("name", self.reader))
        schema = OmegaConf.structured(ExperimentConfig)
        schema.model = registry.config_node(name)
        model = registry.renamed(name, saved.get("model") or {})  # keys renamed since
        if self.format == 1:  # one flat model section: keep this reader's fields
            model = {k: v for k, v in model.items() if k in schema.model}
        added = {k: v for k, v in legacy("model", self.format).items() if k in schema.model}
        model = {**added, **model}  # a key another kind of reader has is not this one's
        saved["data"] = {**legacy("data", self.format), **dict(saved.get("data") or {})}
        train = saved.get("train")
        if self.format < 8 and isinstance(train, dict) and train.get("bf16") is True:
            saved["train"] = {**train, "bf16": None}  # format 8 renamed it: it meant CUDA only
        try:
            cfg = OmegaConf.merge(schema, {**saved, "model": model})
        except Exception as err:
            raise UserError(
                f"checkpoint config does not fit this attnlab version: {one_line(err)}"
            ) from err
        try:  # the command line's checks, before any tensor is built
            DataConfig.check(cfg.data)
            model_schema(cfg.model).check(cfg.model, cfg.data.height)
            registry.check_size(cfg.model, cfg.data.height, cfg.data.charset)
        except UserError as err:
            raise UserError(f"checkpoint config: {err}") from err
        return cfg  # type: ignore[return-value]

    def load_into(self, reader: Reader, path: Path | str) -> None:
        """Load the weights into ``reader``, which must be the kind of reader they are."""
        if self.reader != reader.name:
            raise UserError(
                f"{path}: checkpoint holds {with_article(self.reader)} reader, the config asks for "
                f"{reader.name}"
            )
        try:
            reader.load_state_dict(self.model)
        except (RuntimeError, TypeError, AttributeError, KeyError) as err:
            lines = str(err).splitlines()
            first = lines[1].strip() if len(lines) > 1 else str(err)
            raise UserError(
                f"{path}: checkpoint does not fit the configured model ({first})"
            ) from err

    def rebuild(self, path: Path | str) -> tuple[Reader, ExperimentConfig]:
        """The reader it was trained as, with its weights, in eval mode; and its config."""
        cfg = self.run_config()
        reader = registry.build(cfg.model, cfg.data.height, cfg.data.charset)
        self.load_into(reader, path)
        reader.eval()
        return reader, cfg


def check_finite(weights: dict[str, torch.Tensor], path: Path | str) -> None:
    """Refuse weights holding NaN or infinity: a reader built from them reads every strip
    as nothing, with confidence nan, and a run started from them fails steps later. Checked
    here, once, for every path that loads a checkpoint (read, eval, export, init_from,
    resume)."""
    for key, value in weights.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise UserError(
                f"{path}: the checkpoint holds non-finite weights ({key}: {bad} of "
                f"{value.numel()} values NaN or infinite): refused"
            )


def load(path: Path | str, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Load a checkpoint file; any problem is one clear UserError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; a pickle is not one
        kind = _kind_of_file(path)
        if kind is None:
            raise UserError(f"{path}: not a readable attnlab checkpoint (truncated or corrupt)")
        raise UserError(f"{path}: not an attnlab checkpoint ({kind}, not a file torch.save writes)")
    try:
        with warnings.catch_warnings():  # torch's advice is not the user's business: one line
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:  # objects other than tensors and plain values
        raise UserError(
            f"{path}: not an attnlab checkpoint (it holds Python objects, not only tensors and "
            "plain values; attnlab never loads code from a file)"
        ) from err
    except Exception as err:  # truncated or corrupt
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: not a readable attnlab checkpoint ({reason[:160]})") from err
    return Checkpoint.from_payload(payload, path)


def _kind_of_file(path: Path) -> str | None:
    """What a file that is not a whole zip archive seems to be, in a few words; None for the
    start of one (a checkpoint cut short)."""
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == b"PK":
        return None
    if head[:1] == b"\x80":
        return "a Python pickle"
    return "an empty file" if not head else "not a zip archive"


def _format_of(ckpt: Any) -> str:
    return str(ckpt.get("format")) if isinstance(ckpt, dict) else type(ckpt).__name__
