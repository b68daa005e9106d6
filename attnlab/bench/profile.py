"""profile: where one training step of a reader goes, on one thread (issue 59 item 3). One
recipe step (the trainer's stream, model, optimiser and schedule, as ``attnlab.training.step``
runs them) under ``torch.profiler``, each phase in a ``record_function`` range and the
encoder's modules (convolutions, batch norm, the GRU) in ranges of their own, opened by
forward hooks; then greedy reading and scoring of one validation batch of the same size.

Rows (ms per step, and share of the step plus the validation batch):

- data: the stream's batch without its augmentation (the same lengths drawn again with
  ``augment=False``); augmentation: the rest of the stream's time;
- forward: convolutions, batch norm, GRU (module ranges), the rest of the encoder (pools,
  masks, the column layer), and the CTC loss with the classifier (the forward's rest);
- backward; optimiser step (gradient clipping, AdamW, the schedule);
- validation batch: its forward (the encoder's ranges) and greedy decoding with scoring.

Times under the profiler carry its overhead (a few percent); the shares are the figure.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from attnlab.bench.common import fmt, table
from attnlab.runs.rundir import RunDir
from attnlab.tasks.compose import compose

BATCH = 64  # the recipe's batch (attnlab.tasks.recipe.BUDGET) and the plain CRNN's
ROWS = (
    ("data", "data (strips drawn)"),
    ("augment", "augmentation"),
    ("conv", "forward: convolutions"),
    ("norm", "forward: batch norm"),
    ("gru", "forward: GRU"),
    ("encoder_rest", "forward: rest of the encoder (pools, masks, column layer)"),
    ("loss", "forward: CTC loss (classifier, log-softmax, loss)"),
    ("backward", "backward"),
    ("optimiser", "optimiser step (clip, AdamW, schedule)"),
    ("val_forward", "validation batch: encoder forward"),
    ("val_decode", "validation batch: greedy decoding and scoring"),
)


def configs() -> dict[str, list[str]]:
    """The readers profiled by default: the own-strips recipe at each of its heights
    (attnlab.tasks.recipe) and the plain CRNN (conf/model/plain_crnn.yaml)."""
    from attnlab.tasks.recipe import HEIGHTS, READERS, recipe_keys

    out = {f"recipe: {READERS[h]} at {h} px": recipe_keys(h) for h in sorted(HEIGHTS, reverse=True)}
    out["plain CRNN at 32 px"] = ["model=plain_crnn", "data.height=32"]
    return out


class Ranges:
    """Forward hooks that open a ``record_function`` range named ``<phase>:<kind>`` around
    every module of the kinds profiled; ``phase`` is set by the caller (train, val)."""

    def __init__(self, model: nn.Module):
        from attnlab.models.encoders._conv import MaskedBatchNorm2d

        self.phase = "train"
        self.open: list[Any] = []
        kinds: list[tuple[str, Callable[[nn.Module], bool]]] = [
            ("conv", lambda m: isinstance(m, nn.Conv2d | nn.Conv1d)),
            ("norm", lambda m: isinstance(m, MaskedBatchNorm2d | nn.BatchNorm2d)),
            ("gru", lambda m: isinstance(m, nn.GRU)),
        ]
        self.handles = [self._hook(model.encoder, "encoder")]
        for module in model.modules():
            for kind, match in kinds:
                if match(module):
                    self.handles.append(self._hook(module, kind))

    def _hook(self, module: nn.Module, kind: str):
        def pre(_m, _args):
            r = record_function(f"{self.phase}:{kind}")
            r.__enter__()
            self.open.append(r)

        def post(_m, _args, _out):
            self.open.pop().__exit__(None, None, None)

        return (module.register_forward_pre_hook(pre), module.register_forward_hook(post))

    def remove(self) -> None:
        for a, b in self.handles:
            a.remove()
            b.remove()


def _step(trainer: Any, lengths_again: Callable[[], Any]) -> None:
    """One optimiser step as attnlab.training.step takes it, each phase in its range."""
    from attnlab.runtime import autocast

    trainer.model.train()
    trainer.opt.zero_grad(set_to_none=True)
    with record_function("train:stream"):
        batch = trainer.stream.next()
    with record_function("train:data"):
        lengths_again(batch)
    with record_function("train:forward"), autocast(trainer.device, trainer.autocast):
        loss = trainer.loss_fn(batch.images, batch.widths, batch.labels)
    with record_function("train:backward"):
        loss.backward()
    with record_function("train:optimiser"):
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), trainer.cfg.optim.grad_clip)
        trainer.opt.step()
        trainer.state.schedule.step()


def _validate(trainer: Any, batches: list[Any]) -> None:
    """Read (greedy) and score the validation batch, as validation reads its sets."""
    from attnlab.evaluation.inference import read_strips
    from attnlab.evaluation.metrics import quick_scores

    trainer.model.eval()
    with record_function("val:read"):
        for strips in batches:
            r = read_strips(trainer.model, strips, trainer.device, 512, False, trainer.autocast)
            quick_scores(strips.labels, r.texts)


def _unaugmented(trainer: Any) -> Callable[[Any], Any]:
    """Draws the same lengths as a batch again without augmentation (the data row); a
    stream that is not the synthetic one draws nothing (its augmentation is not split)."""
    from attnlab.data.strips import TrainStream

    if not isinstance(trainer.stream, TrainStream):
        return lambda batch: None
    gen = torch.Generator().manual_seed(1)

    def draw(batch: Any) -> Any:
        lengths = torch.tensor([len(t) for t in batch.labels])
        return trainer.synth.sample(lengths, gen, augment=False)

    return draw


def _val_batch(trainer: Any, size: int) -> list[Any]:
    """The validation batch: ``size`` strips from the validation sets, longest length first
    (one piece per length, as validation reads them)."""
    picked, left = [], size
    for n in sorted(trainer.val_sets, reverse=True):
        s = trainer.val_sets[n]
        take = min(left, len(s))
        picked.append(s.select(list(range(take))))
        left -= take
        if not left:
            break
    return picked


def run(
    name: str, keys: list[str], device: str, overrides: list[str], steps: int = 3
) -> dict[str, Any]:
    """Profile ``steps`` recipe steps (after one unprofiled) and one validation batch of the
    config ``keys`` + ``overrides`` (train.batch_size 64 unless they set it)."""
    from attnlab.training.trainer import Trainer

    cfg = compose([f"train.batch_size={BATCH}", *keys, f"train.device={device}", *overrides])
    with tempfile.TemporaryDirectory(prefix="attnlab_profile_") as tmp:
        trainer = Trainer(cfg, RunDir(tmp))
        again = _unaugmented(trainer)
        val = _val_batch(trainer, cfg.train.batch_size)
        _step(trainer, again)  # warm-up: first-call costs out of the figures
        _validate(trainer, val)
        ranges = Ranges(trainer.model)
        started = time.perf_counter()
        try:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    _step(trainer, again)
                ranges.phase = "val"
                _validate(trainer, val)
        finally:
            ranges.remove()
        wall = time.perf_counter() - started
        ms = _by_range(prof)
        rows = _rows(ms, steps)
        return {
            "name": name,
            "keys": [*keys, *overrides],
            "batch_size": int(cfg.train.batch_size),
            "height": int(cfg.data.height),
            "params": trainer.params,
            "steps": steps,
            "threads": torch.get_num_threads(),
            "wall_s": round(wall, 2),
            "ms": rows,
            "step_ms": round(sum(v for k, v in rows.items() if not k.startswith("val_")), 2),
            "total_ms": round(sum(rows.values()), 2),
        }


def _by_range(prof: Any) -> dict[str, float]:
    """Inclusive CPU ms summed over the calls of every range (``phase:kind``)."""
    out: dict[str, float] = {}
    for e in prof.key_averages():
        if ":" in e.key and e.key.split(":", 1)[0] in ("train", "val"):
            out[e.key] = out.get(e.key, 0.0) + e.cpu_time_total / 1e3
    return out


def _rows(ms: dict[str, float], steps: int) -> dict[str, float]:
    """The table's rows in ms per step (the validation batch as measured once)."""

    def g(key: str) -> float:
        return ms.get(key, 0.0)

    per = {k: v / steps for k, v in ms.items() if k.startswith("train:")}
    t = lambda key: per.get(f"train:{key}", 0.0)  # noqa: E731
    parts = t("conv") + t("norm") + t("gru")
    rows = {
        "data": min(t("data"), t("stream")) if t("data") else t("stream"),
        "augment": max(t("stream") - t("data"), 0.0) if t("data") else 0.0,
        "conv": t("conv"),
        "norm": t("norm"),
        "gru": t("gru"),
        "encoder_rest": max(t("encoder") - parts, 0.0),
        "loss": max(t("forward") - t("encoder"), 0.0),
        "backward": t("backward"),
        "optimiser": t("optimiser"),
        "val_forward": g("val:encoder"),
        "val_decode": max(g("val:read") - g("val:encoder"), 0.0),
    }
    return {k: round(v, 3) for k, v in rows.items()}


def show(results: list[dict[str, Any]], device: str) -> None:
    print(
        f"profile: one recipe step (torch.profiler, {results[0]['threads']} thread(s)) on {device}"
    )
    header = ["phase"]
    for r in results:
        header += [r["name"], "share"]
    lines = []
    for key, label in ROWS:
        row = [label]
        for r in results:
            row += [fmt(r["ms"][key], 1), _share(r["ms"][key], r["total_ms"])]
        lines.append(row)
    total = ["step (training rows)"]
    for r in results:
        total += [fmt(r["step_ms"], 1), _share(r["step_ms"], r["total_ms"])]
    lines.append(total)
    print(table(lines, header))
    for r in results:
        print(
            f"({r['name']}: {' '.join(r['keys'])}; batch {r['batch_size']}, {r['params']:,} "
            f"parameters; ms per step, mean of {r['steps']}; validation: one batch of "
            f"{r['batch_size']})"
        )


def _share(part: float, whole: float) -> str:
    return "-" if not whole or math.isnan(whole) else f"{100 * part / whole:.0f}%"
