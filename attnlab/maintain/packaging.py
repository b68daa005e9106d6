"""The packaged reader made and checked, for ``scripts/pretrain.py`` (the product finds it
through ``attnlab.runs.pretrained``; its files lie in ``attnlab/weights/``): ``package``
turns a finished run's best.pt into ``attnlab/weights/pretrained.pt`` (weights and config,
no optimiser state: a starting point, not a run to resume) with its record, and
``reading_check`` reads the fixed synthetic test strips with it, so that the record says
what the reader reads and a test can check it again on any machine."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from attnlab.config import seen_lengths
from attnlab.data.strips import StripSynth, fixed_set
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.metrics import quick_scores
from attnlab.io import write_json, write_text
from attnlab.runs import checkpoint, pretrained
from attnlab.runs.checkpoint import Checkpoint
from attnlab.tasks.recipe import PACKAGED

__all__ = ["PACKAGED", "package", "reading_check"]

# The strips the record is read on: the fixed test strips of each seen length (drawn from
# data.eval_seed, never a training strip: training draws from its own seed).
PER_LENGTH = 50
PIN = re.compile(r'^pretrained = "[0-9a-f]*"$', re.M)


def reading_check(path: Path) -> dict[str, Any]:
    """What the checkpoint at ``path`` reads on PER_LENGTH fixed test strips of each of its
    seen lengths: exact accuracy and CER over all of them, and the count of strips."""
    got = checkpoint.restore(path, "cpu")
    cfg = got.config
    synth = StripSynth(cfg.data)
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
    """``run``'s best.pt, slimmed, as the packaged reader (in ``folder``: the package's own
    by default); its record written beside it (and its digest into ``pins``, lock-pins.toml,
    when given). Returns the record."""
    out, record_file = folder / pretrained.CHECKPOINT.name, folder / pretrained.RECORD.name
    ckpt = checkpoint.load(checkpoint.resolve(run, "best"))
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
        "command": command,
        "reader": ckpt.reader,
        "backbone": model.get("backbone", "column"),
        "height": int(ckpt.config.get("data", {}).get("height", 32)),  # what it reads at
        "step": int(ckpt.step),
        "params": ckpt.params,
        "reads": reading_check(out),
        "sha256": pretrained.digest(out),
        "drawn_by": ckpt.drawn_by,
    }
    write_json(record_file, record)
    if pins is not None:
        text = pins.read_text(encoding="utf-8")
        line = f'pretrained = "{record["sha256"]}"'
        write_text(pins, PIN.sub(line, text) if PIN.search(text) else _top_level(text, line))
    return record


def _top_level(toml: str, line: str) -> str:
    """``line`` added to the top-level keys of ``toml``: before its first table."""
    head, table, rest = toml.partition("\n[")
    return f"{head.rstrip()}\n{line}\n\n[{rest}" if table else f"{toml.rstrip()}\n{line}\n"
