"""Validation during training: the fixed validation sets read, scored per length, logged as
"truth | reading | confidence" rows, and written to TensorBoard with a few attention maps."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.config.experiment import patience_measure
from attnlab.data.strips import StripBatch
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.metrics import quick_scores

log = logging.getLogger("attnlab.train")

Shown = list[tuple[str, str, float]]  # truth, reading, confidence


def validate(
    model: Any, val_sets: dict[int, StripBatch], device: torch.device, bf16: bool, shown_n: int
) -> tuple[dict[str, Any], Shown]:
    """Exact accuracy and CER per length and their means over lengths; and the first
    ``shown_n`` readings of the longest length."""
    by_length, shown = {}, []
    for n, strips in val_sets.items():
        r = read_strips(model, strips, device, 512, keep_weights=False, bf16=bf16)
        exact, cer = quick_scores(strips.labels, r.texts)
        by_length[str(n)] = {"exact_acc": exact, "cer": cer}
        if n == max(val_sets):
            shown = [
                (strips.labels[i], r.texts[i], float(r.confidence[i]))
                for i in range(min(shown_n, len(strips)))
            ]
    exact = sum(v["exact_acc"] for v in by_length.values()) / len(by_length)
    cer = sum(v["cer"] for v in by_length.values()) / len(by_length)
    return {"exact_acc": exact, "cer": cer, "by_length": by_length}, shown


def log_validation(step: int, val: dict[str, Any], shown: Shown) -> None:
    by_length = val["by_length"]
    worst = min(by_length.items(), key=lambda kv: kv[1]["exact_acc"])
    log.info(
        "step %d validation: exact %.2f%%  CER %.2f%%  (worst: length %s at %.1f%%)",
        step,
        100 * val["exact_acc"],
        100 * val["cer"],
        worst[0],
        100 * worst[1]["exact_acc"],
    )
    log.info("  truth | reading | confidence")
    for truth, reading, conf in shown:
        mark = "" if truth == reading else "   <- wrong"
        log.info("  %s | %s | %.3f%s", truth, reading or "(empty)", conf, mark)


def write_validation(
    writer: Any,
    step: int,
    val: dict[str, Any],
    model: Any,
    val_sets: dict[int, StripBatch],
    maps: int,
    bf16: bool = False,
) -> None:
    """The validation ``val`` at ``step`` to TensorBoard, and the attention maps of the first
    ``maps`` strips of the longest validation set (when the reader has weights)."""
    writer.add_scalar("val/exact_acc", val["exact_acc"], step)
    writer.add_scalar("val/cer", val["cer"], step)
    for n, v in val["by_length"].items():
        writer.add_scalar(f"val_exact_acc/len{int(n):02d}", v["exact_acc"], step)
        writer.add_scalar(f"val_cer/len{int(n):02d}", v["cer"], step)
    if maps:
        top = val_sets[max(val_sets)]
        kept = top.select(list(range(min(maps, len(top)))))
        device = next(model.parameters()).device
        write_attention_images(writer, step, model, kept, device, bf16)


def write_attention_images(
    writer: Any, step: int, model: Any, strips: StripBatch, device: torch.device, bf16: bool
) -> None:
    """Weights of a few validation strips as TensorBoard images, when the reader has them."""
    r = read_strips(model, strips, device, 64, bf16=bf16)
    for i, w in enumerate(r.weights or []):
        img = torch.from_numpy(w).float()
        img = img / img.amax().clamp(min=1e-6)
        img = img.repeat_interleave(8, 0).repeat_interleave(4, 1)[None]  # (1, S*8, T*4)
        writer.add_image(f"attention/{i}_{strips.labels[i]}", img, step)


def watched(objective: str | None) -> tuple[str, str, bool]:
    """(name, history column, higher is better) of what ``train.patience`` watches."""
    name = patience_measure(objective)
    return (name, "val_cer", False) if name == "val_cer" else (name, "val_exact_acc", True)


@dataclass
class Standing:
    """Where the validations of a history stand on the watched measure."""

    name: str  # val_exact | val_cer
    since_best: int  # validations after the best one (0: the last one is the best)
    best_step: int | None  # the step of the best validation (the first of equal ones)
    best: float | None
    last_step: int | None  # the step of the last validation
    validations: int
    # whether the best is strictly better than the start (the validation at step 0; True
    # when the history has none): until then no validation counts as "no improvement"
    improved: bool = True


def standing(
    history: list[dict[str, Any]], objective: str | None, untrained: bool = False
) -> Standing:
    """How many validations of ``history`` came after the best one on the measure
    ``train.patience`` watches; only a strictly better value counts as an improvement. The
    validation at step 0 (the untrained reader, which best.pt never holds) counts only with
    ``untrained`` (is the last validation better than every one before it?)."""
    name, column, higher = watched(objective)
    first = 0 if untrained else 1
    every = [(int(r["step"]), float(r[column])) for r in history if column in r]
    start = next((value for step, value in every if step == 0), None)
    rows = [(step, value) for step, value in every if step >= first]
    best_i = None
    for i, (_, value) in enumerate(rows):
        if best_i is None or (value > rows[best_i][1] if higher else value < rows[best_i][1]):
            best_i = i
    if best_i is None:
        return Standing(name, 0, None, None, None, 0)
    best = rows[best_i][1]
    improved = start is None or (best > start if higher else best < start)
    return Standing(
        name, len(rows) - 1 - best_i, rows[best_i][0], best, rows[-1][0], len(rows), improved
    )


def patience_spent(history: list[dict[str, Any]], train: Any) -> Standing | None:
    """The history's standing when ``train.patience`` (K > 0) validations have passed
    without a better watched measure: the run ends there. None: it trains on. Validations
    before the first one better than the start (step 0) do not count: an untrained reader
    that reads nothing yet (0% = 0%) has not stopped improving, it has not begun."""
    if not train.patience:
        return None
    now = standing(history, train.objective)
    return now if now.improved and now.since_best >= int(train.patience) else None


def stopped_early(history: list[dict[str, Any]], train: Any, step: int) -> dict[str, Any] | None:
    """metrics.json's record of a run ``train.patience`` ended at ``step``, before
    ``train.steps`` (and the log line that says so); None for a run that trained to the end."""
    spent = patience_spent(history, train)
    if spent is None or step >= train.steps:
        return None
    log.info(
        "stopped early at step %d of %d: %d validations without a better %s (train.patience="
        "%d); the best, %.4f, at step %d",
        step,
        train.steps,
        spent.since_best,
        spent.name,
        train.patience,
        spent.best,
        spent.best_step,
    )
    return {
        "step": step,
        "patience": int(train.patience),
        "measure": spent.name,
        "best_step": spent.best_step,
        "best": spent.best,
    }
