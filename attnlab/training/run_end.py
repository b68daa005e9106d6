"""What a run leaves when it has trained to its end (``attnlab.training.trainer``'s ``run``):
metrics.json (``runs.rundir.TrainMetrics``: the reader, steps, speed, validation, best, threads,
device, early stop, what drew it, its budget, self-training's rounds), the history beside it,
the TensorBoard writer closed, and the closing log line. It reads the trainer and sets none
of its attributes.
"""

from __future__ import annotations

import logging
from typing import Any

from attnlab.runs.rundir import TrainMetrics
from attnlab.runtime import device_label
from attnlab.training.validation import stopped_early

log = logging.getLogger("attnlab.train")


def finish_run(trainer: Any) -> dict[str, Any]:
    """metrics.json and the history of a run trained to its end; its metrics."""
    t, spent = trainer.cfg.train, trainer.state.seconds
    strips = trainer.state.trained_steps * t.batch_size * t.accumulate
    metrics = TrainMetrics(
        reader=trainer.model.name,
        step=trainer.step,
        params=trainer.params,
        elapsed_s=round(spent, 2),
        strips_per_s=round(strips / max(spent, 1e-9), 1),
        seen_lengths=trainer.seen,
        val=trainer.state.last_val,
        best=trainer.state.best.record(),
        threads=trainer.threads.counts,
        device=device_label(trainer.device),
        stopped_early=stopped_early(trainer.state.history, t, trainer.step),
        drawn_by=trainer.state.drawn_by,
        budget=trainer.budget.record(trainer.step, spent, trainer.ended_by()),
        self_training=trainer.state.rounds and trainer.state.rounds.record(taken=False),
    )
    trainer.run_dir.write_metrics(metrics)
    trainer.run_dir.write_history(trainer.state.history)
    trainer.writer.close()
    log.info(
        "done: step %d, validation exact %.2f%% CER %.2f%%, best %s %.4f at step %d; %s",
        trainer.step,
        100 * trainer.state.last_val["exact_acc"],
        100 * trainer.state.last_val["cer"],
        trainer.state.best.measure,
        trainer.state.best.value or 0.0,
        trainer.state.best.step,
        trainer.run_dir.path,
    )
    return metrics.__dict__
