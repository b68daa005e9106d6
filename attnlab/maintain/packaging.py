"""The packaged readers made and checked, for ``scripts/pretrain.py`` (the product finds them
through ``attnlab.runs.pretrained``; their files lie in ``attnlab/weights/``): ``package``
turns a finished run's best.pt into ``attnlab/weights/pretrained-H.pt`` for its height H
(weights and config, no optimiser state: a starting point, not a run to resume) with its
record, and ``reading_check`` reads attnlab's default synthetic test strips with it, so that
the record says what the reader reads and a test can check it again on any machine.

What each is pretrained on (``pretrain_keys(H)``): the recipe's packaged reader at that
height (``attnlab.tasks.recipe.PACKAGED``), on what attnlab draws and nothing else: every
face of the glyph bank (``data.fonts``), glyph variants bent in the bank (``data.elastic``),
half the strips captcha-like (``data.clutter``: bent, slanted, rotated and overlapping
glyphs on grey paper with gradients and blotches, noise curves and dots, perspective, blur,
noise, JPEG; ``attnlab.data.clutter``) and a share of the rest JPEG'd. No image of the
``captcha`` package and no MNIST digit: its record (``trained_on``) says so from the run's
own config (its data source and keys, faces, seed and budget)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from attnlab.config import DataConfig, seen_lengths
from attnlab.data.glyphs import glyph_bank
from attnlab.data.strips import StripSynth, fixed_set
from attnlab.errors import UserError
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.metrics import quick_scores
from attnlab.io import write_json, write_text
from attnlab.runs import checkpoint, locate, pretrained
from attnlab.runs.checkpoint import Checkpoint
from attnlab.runs.restore import restore
from attnlab.tasks.recipe import PACKAGED

__all__ = [
    "MIXTURE",
    "PACKAGED",
    "SEED",
    "package",
    "pretrain_keys",
    "reading_check",
    "trained_on",
]

# The strips they are pretrained on, beyond the synthetic default (module docstring).
MIXTURE = ("data.clutter=0.5", "data.elastic=1.5", "data.jpeg=0.25")
SEED = 0  # scripts/pretrain.py's seed unless given: the same strips, the same reader


def pretrain_keys(height: int) -> tuple[str, ...]:
    """What ``scripts/pretrain.py --height H`` trains: the packaged reader of that height and
    the height (``PACKAGED``), on the mixture."""
    return (*PACKAGED[height], *MIXTURE)


# The data keys the record names (what decides the strips a run trained on).
DATA_KEYS = (
    "source", "path", "mix", "unlabelled", "height", "charset", "train_lengths",
    "train_length_set", "fonts", "exclude_fonts", "font_sizes", "stroke_widths", "elastic",
    "clutter", "jpeg", "augmented", "augment",
)  # fmt: skip

# The strips the record is read on: the fixed test strips of each seen length as attnlab
# draws them by default at the reader's height (data.eval_seed: never a training strip).
PER_LENGTH = 50


def reading_check(path: Path) -> dict[str, Any]:
    """What the checkpoint at ``path`` reads on PER_LENGTH fixed test strips of each of its
    seen lengths: exact accuracy and CER over all of them, and the count of strips. The
    strips are the synthetic default's at the reader's height and charset (``DataConfig``),
    whatever mixture it trained on (bent glyphs, clutter): the lab's strips, whose glyph
    bank every user and test of that height shares, not a bank of the mixture's own."""
    got = restore(path, "cpu")
    cfg = got.config
    synth = StripSynth(DataConfig(height=int(cfg.data.height), charset=str(cfg.data.charset)))
    lengths = seen_lengths(cfg.data)
    labels, texts = [], []
    with torch.no_grad():
        for n in lengths:
            strips = fixed_set(synth, "test", n, PER_LENGTH)
            labels += strips.labels
            texts += read_strips(got.reader, strips, got.device, 256, keep_weights=False).texts
    exact, cer = quick_scores(labels, texts)
    return {"strips": len(labels), "lengths": lengths, "exact_acc": exact, "cer": cer}


def package(
    run: Path, command: str, pins: Path | None = None, folder: Path = pretrained.FOLDER
) -> dict[str, Any]:
    """``run``'s best.pt, slimmed, as the packaged reader of its height (in ``folder``: the
    package's own by default); its record written beside it (and its digest into ``pins``,
    lock-pins.toml, under the reader's name, when given). Returns the record."""
    ckpt = checkpoint.load(locate.resolve(run, "best"))
    height = int(ckpt.config.get("data", {}).get("height", 32))  # what it reads at
    if height not in pretrained.HEIGHTS:
        raise UserError(
            f"{run}: trained at {height} px; packaged readers are of "
            f"{', '.join(map(str, pretrained.HEIGHTS))} px (attnlab.runs.pretrained.HEIGHTS)"
        )
    out, record_file = (
        pretrained.checkpoint_of(height, folder),
        pretrained.record_of(height, folder),
    )
    slim = Checkpoint(
        reader=ckpt.reader,
        model=ckpt.model,
        config=ckpt.config,
        step=ckpt.step,
        history=ckpt.history,
        best=ckpt.best,
        best_metrics=ckpt.best_metrics,
        val=ckpt.val,
        params=ckpt.params,
        timing=ckpt.timing,
        drawn_by=ckpt.drawn_by,
    )
    slim.save(out)
    model = ckpt.config.get("model", {})
    record = {
        "name": pretrained.name_of(height),
        "command": command,
        "reader": ckpt.reader,
        "backbone": model.get("backbone", "column"),
        "height": height,
        "step": int(ckpt.step),
        "params": ckpt.params,
        "reads": reading_check(out),
        "sha256": pretrained.digest(out),
        "drawn_by": ckpt.drawn_by,
        "trained_on": trained_on(restore(out, "cpu").config, ckpt.timing),
    }
    write_json(record_file, record)
    if pins is not None:
        text = pins.read_text(encoding="utf-8")
        name = pretrained.name_of(height)
        pin = re.compile(rf'^"?{re.escape(name)}"? = "[0-9a-f]*"$', re.M)
        line = f'{name} = "{record["sha256"]}"'
        write_text(pins, pin.sub(line, text) if pin.search(text) else _top_level(text, line))
    return record


def _top_level(toml: str, line: str) -> str:
    """``line`` added to the top-level keys of ``toml``: before its first table."""
    head, table, rest = toml.partition("\n[")
    return f"{head.rstrip()}\n{line}\n\n[{rest}" if table else f"{toml.rstrip()}\n{line}\n"


def trained_on(cfg: Any, timing: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a run with the composed config ``cfg`` trained on: its data keys (``DATA_KEYS``),
    the faces of its glyph bank (synthetic strips), its seed and its budget; and, given its
    checkpoint's ``timing``, the seconds and steps it trained."""
    data, train = cfg.data, cfg.train
    keys = {k: _plain(data[k]) for k in DATA_KEYS if k in data}
    drawn = data.source != "folder" or float(data.mix) > 0  # synthetic strips in its batches
    faces = sorted({r.split("@")[0] for r in glyph_bank(data).renderings}) if drawn else []
    budget = {"steps": int(train.steps), "minutes": _plain(train.get("minutes"))}
    out = {"data": keys, "faces": len(faces), "seed": int(cfg.seed), "budget": budget}
    if timing:
        out["trained"] = {"seconds": timing.get("train_seconds"), "steps": timing.get("steps")}
    return out


def _plain(value: Any) -> Any:
    """A config value as JSON holds it (lists for OmegaConf's lists)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
