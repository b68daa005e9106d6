"""What a training command settles once, before its trainer is built: the config checked
(``check_training``) and torch's threads set (``training_threads``).

The session (``attnlab.training.session``) calls both, once per command, and hands the
result to the ``Trainer``; a trainer built outside a session (a benchmark, a test) is given
a config that nobody checked yet, and checks it itself (``Trainer(checked=False)``).
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from attnlab.config import check_experiment
from attnlab.models import registry
from attnlab.runtime import set_threads, usable_cpus
from attnlab.threads import FixedThreads, ThreadGovernor, governor
from attnlab.training.freeze import check_freeze


def check_training(cfg: DictConfig) -> None:
    """Every value check of a training config, then the reader's size (built on the meta
    device): a refusal here comes before anything is allocated or written."""
    check_experiment(cfg)
    registry.check_size(cfg.model, cfg.data.height, cfg.data.charset)
    name = str(cfg.model.name)
    check_freeze(getattr(cfg.train, "freeze", None), registry.get(name).reader, name)


def training_threads(t: Any) -> ThreadGovernor | FixedThreads:
    """torch's threads set to ``train.threads`` (0: torch's default), and the run's thread
    policy over them (``train.thread_policy``: fewer while others keep the CPUs busy)."""
    set_threads(t.threads)
    idle = t.threads or min(torch.get_num_threads(), usable_cpus())  # today's count
    return governor(t.thread_policy, idle)
