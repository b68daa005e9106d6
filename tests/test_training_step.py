"""One optimiser step (attnlab.training.step, split out of the trainer's module): what it
returns, and how it fails in the user's words. The trainer is handed a stream of its own
(``Trainer(..., stream=)``, the benchmark's hook), so each failure is a real batch or a real
allocation error reaching the step, not a patched trainer."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.readers import tiny_config

from attnlab.errors import UserError
from attnlab.runs.rundir import RunDir
from attnlab.training.step import NonFiniteLoss
from attnlab.training.trainer import Trainer


class Failing:
    """A training stream whose batches raise ``error`` (or are ``batch`` with NaN pixels)."""

    def __init__(self, error: BaseException | None = None, batch=None):
        self.error, self.batch = error, batch

    def next(self):
        if self.error is not None:
            raise self.error
        self.batch.images.fill_(math.nan)
        return self.batch

    def state(self) -> torch.Tensor:
        return torch.zeros(1)

    def load_state(self, state: torch.Tensor) -> None:
        pass


@pytest.fixture(scope="module")
def cfg():
    return tiny_config("attention", "train.threads=1", "train.batch_size=4")


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8"),
    ],
)
def test_a_batch_that_cannot_be_allocated_names_the_batch_size(cfg, tmp_path, error):
    trainer = Trainer(cfg, RunDir(tmp_path / "run"), stream=Failing(error))
    with pytest.raises(UserError) as got:
        trainer.advance()
    assert str(got.value) == (
        "train.batch_size=4: cannot allocate a batch that large on this machine; use a smaller "
        "train.batch_size with train.accumulate=K (K micro-batches per step)"
    )
    assert trainer.step == 0  # not counted


def test_another_runtime_error_is_not_called_a_memory_error(cfg, tmp_path):
    trainer = Trainer(cfg, RunDir(tmp_path / "run"), stream=Failing(RuntimeError("shapes differ")))
    with pytest.raises(RuntimeError, match="shapes differ") as got:
        trainer.train_step()
    assert not isinstance(got.value, UserError)


def test_a_step_trains_and_a_non_finite_loss_is_refused_in_one_line(cfg, tmp_path):
    trainer = Trainer(cfg, RunDir(tmp_path / "run"))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    loss = trainer.advance()
    assert math.isfinite(loss) and loss > 0 and trainer.step == 1
    assert any(
        not torch.equal(a, p) for a, p in zip(before, trainer.model.parameters(), strict=True)
    )
    nan = Trainer(cfg, RunDir(tmp_path / "nan"), stream=Failing(batch=trainer.stream.next()))
    with pytest.raises(NonFiniteLoss) as got:
        nan.advance()
    assert str(got.value) == (
        "non-finite loss (nan) at step 1: training stopped, no checkpoint yet "
        "(try a lower optim.lr)"
    )
    assert isinstance(got.value, UserError) and "\n" not in str(got.value)
