"""The Hydra task behind ``attnlab cost [RUN | model=NAME ...]`` (the work:
``attnlab.tasks.cost_run``)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from attnlab.errors import reports_user_errors
from attnlab.models import registry

registry.discover()  # reader configs are in the ConfigStore before Hydra composes


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="cost")
@reports_user_errors
def main(cfg: DictConfig) -> None:
    """``attnlab cost``: parameters, FLOPs, time and memory of readers by strip length."""
    from hydra.core.hydra_config import HydraConfig

    from attnlab.runtime import set_threads
    from attnlab.tasks.cost_run import run

    set_threads(cfg.train.threads)  # fixed threads (0: torch's default): times comparable
    run(cfg, list(HydraConfig.get().overrides.task))
