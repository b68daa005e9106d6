"""One optimiser step of a trainer (``attnlab.training.trainer``): ``train.accumulate``
micro-batches drawn from its stream, each one's loss under bf16 autocast where asked
(``runtime.autocast``) and backpropagated, the summed loss checked finite, the gradients
clipped (``optim.grad_clip``), then the optimiser and the schedule stepped. A step that
fails is refused in the user's words, in one line: a batch that does not fit in memory
(``train.batch_size`` with ``train.accumulate``), a loss that is not finite (``NonFiniteLoss``,
naming the last good checkpoint). The step reads the trainer and sets none of its attributes
(what changes is its optimiser's, its schedule's and its timer's).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from attnlab.errors import UserError
from attnlab.runtime import autocast


class NonFiniteLoss(UserError):
    pass


def optimiser_step(trainer: Any) -> float:
    try:
        return _train_step(trainer)
    except (MemoryError, torch.OutOfMemoryError) as err:
        raise UserError(_no_memory(trainer.cfg.train)) from err
    except RuntimeError as err:
        if "allocate" not in str(err):
            raise
        raise UserError(_no_memory(trainer.cfg.train)) from err


def _train_step(trainer: Any) -> float:
    trainer.model.train()
    trainer.opt.zero_grad(set_to_none=True)
    acc = trainer.cfg.train.accumulate
    total = 0.0
    for _ in range(acc):
        drawn = time.perf_counter()
        batch = trainer.stream.next()
        trainer.timer.data_s += time.perf_counter() - drawn
        images = batch.images.to(trainer.device, non_blocking=True)
        widths = batch.widths.to(trainer.device)
        with autocast(trainer.device, trainer.autocast):
            loss = trainer.loss_fn(images, widths, batch.labels)
        (loss / acc).backward()
        total += float(loss.detach()) / acc
    if not math.isfinite(total):
        last = trainer.run_dir.checkpoint("last")
        kept = f"the last good checkpoint is {last}" if last.exists() else "no checkpoint yet"
        raise NonFiniteLoss(
            f"non-finite loss ({total}) at step {trainer.step + 1}: training stopped, {kept} "
            f"(try a lower optim.lr)"
        )
    torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), trainer.cfg.optim.grad_clip)
    trainer.opt.step()
    trainer.state.schedule.step()
    return total


def _no_memory(t: Any) -> str:
    return (
        f"train.batch_size={t.batch_size}: cannot allocate a batch that large on this machine; "
        f"use a smaller train.batch_size with train.accumulate=K (K micro-batches per step)"
    )
