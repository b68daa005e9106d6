"""The Hydra task behind ``attnlab eval RUN`` (the work: ``attnlab.evaluation.evaluate``)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from attnlab.errors import reports_user_errors
from attnlab.evaluation.evaluate import evaluate_run
from attnlab.threads import adapt_once


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="evaluate")
@reports_user_errors
def main(cfg: DictConfig) -> None:
    """``attnlab eval RUN``: evaluate a run directory or checkpoint."""
    adapt_once()  # no more threads than the CPUs other processes leave free
    evaluate_run(cfg.run, cfg.eval, cfg.checkpoint, cfg.device, onnx=cfg.onnx)
