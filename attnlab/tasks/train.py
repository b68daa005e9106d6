"""The Hydra task behind ``attnlab train``: one reader trained in Hydra's output directory.

Everything a run leaves is in its run directory (no chdir): the composed config
(``.hydra/``), ``checkpoints/last.pt`` and ``best.pt``, TensorBoard events (``tb/``),
``train.log``, ``history.csv``, ``status.json`` and, when finished, ``metrics.json``.
A run restarted on the same directory (a cluster requeue) continues from ``last.pt``.
The loop is ``attnlab.training.trainer``; the session around it ``attnlab.training.session``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from attnlab.config import OBJECTIVES, check_objective_of
from attnlab.errors import reports_user_errors
from attnlab.models import registry
from attnlab.training.session import record_objective, train, validation_objective

registry.discover()  # reader configs are in the ConfigStore before Hydra composes

log = logging.getLogger("attnlab.train")


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="train")
@reports_user_errors
def main(cfg: DictConfig) -> dict[str, Any] | float:
    """``attnlab train``: one run in Hydra's output directory; with ``train.objective``, the
    objective's value (a float, what Hydra's sweepers want) instead of the metrics."""
    cfg = as_composed(cfg)
    objective = cfg.train.get("objective")
    if objective in OBJECTIVES:  # an unknown one is refused with the config's other checks
        check_objective_of("train", objective)
    metrics = train(cfg, hydra_run_dir())
    if objective is None:
        return metrics
    return record_objective(hydra_run_dir(), objective, validation_objective(objective, metrics))


def as_composed(cfg: DictConfig) -> DictConfig:
    """The job's config with what ``attnlab.tasks.recipe`` adds to its overrides (the
    own-strips recipe, init_from's reader), composed again; as it was when that adds
    nothing (the CLI has added it already to a run's command, or nothing applies). Each
    job of a multirun resolves its own overrides here: its own ``data.path``."""
    from attnlab.tasks.compose import compose_as_given
    from attnlab.tasks.recipe import resolve

    overrides = list(HydraConfig.get().overrides.task)
    resolved = resolve(overrides)
    if resolved is None:
        return cfg
    log.info("%s", resolved.line)  # on the console and in train.log
    return compose_as_given([*overrides, *resolved.keys])


def hydra_run_dir() -> Path:
    return Path(HydraConfig.get().runtime.output_dir)
