"""The Hydra task behind ``attnlab probe RUN`` (the work: ``attnlab.evaluation.probe``)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from attnlab.errors import reports_user_errors
from attnlab.evaluation.probe import probe_run


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="probe")
@reports_user_errors
def main(cfg: DictConfig) -> None:
    """``attnlab probe RUN``: probe a run directory or checkpoint."""
    probe_run(cfg.run, cfg.probe, cfg.checkpoint, cfg.device)
