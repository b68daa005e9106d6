"""Structured configs: typed dataclasses registered in Hydra's ConfigStore, each with its own
``check`` of the values a type cannot rule out.

The YAML files in ``attnlab.conf`` (the repo's ``conf/``) only choose values; every key and
type is declared here (a reader's own fields in its module), so a misspelt key or a wrong
type is a one-line composition error. ``attnlab.tasks.compose`` builds a config outside a
Hydra task (benchmarks, tests, scripts) as the tasks compose it.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from attnlab.config.cost import CostTaskConfig
from attnlab.config.data import DataConfig
from attnlab.config.experiment import (
    MAX_EVAL_LENGTH,
    OBJECTIVES,
    EvalConfig,
    ExperimentConfig,
    OptimConfig,
    TrainConfig,
    check_experiment,
    check_objective_of,
    lengths_label,
    model_schema,
    plain_config,
    seen_lengths,
)
from attnlab.config.model import ModelConfig
from attnlab.config.rules import check_beam, check_device, check_seed, span
from attnlab.config.tasks import (
    DataTaskConfig,
    EvalTaskConfig,
    ExportConfig,
    PreviewConfig,
    ProbeConfig,
    ProbeTaskConfig,
    RunTaskConfig,
)
from attnlab.config.tune import TuneTaskConfig


def share_the_store() -> None:
    """Every composition deep-copies Hydra's ConfigStore: ``CachingConfigRepository`` copies
    the repository it wraps (so that ``initialize_sources`` cannot change it), and the
    repository's structured-config source holds the store, every schema in it. That copy was
    about a fifth of a composition's CPU (0.13 s to 0.10 s for ``compose(["preset=tiny",
    "model=attention"])``), and nothing needs it: composition never changes the store
    (``ConfigStore.load`` hands out a deep copy of each node it loads), and the store is the
    process's one instance. A copy of it is the store itself; the composed configs are the
    same (tests/test_config_store.py)."""
    ConfigStore.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]


def register_configs() -> None:
    share_the_store()
    cs = ConfigStore.instance()
    cs.store(name="experiment_schema", node=ExperimentConfig)
    cs.store(name="eval_schema", node=EvalTaskConfig)
    cs.store(name="data_schema", node=DataTaskConfig)
    cs.store(name="probe_schema", node=ProbeTaskConfig)
    cs.store(name="cost_schema", node=CostTaskConfig)
    cs.store(name="tune_schema", node=TuneTaskConfig)


register_configs()

__all__ = [
    "MAX_EVAL_LENGTH",
    "OBJECTIVES",
    "DataConfig",
    "DataTaskConfig",
    "EvalConfig",
    "EvalTaskConfig",
    "ExperimentConfig",
    "ExportConfig",
    "ModelConfig",
    "OptimConfig",
    "PreviewConfig",
    "ProbeConfig",
    "ProbeTaskConfig",
    "RunTaskConfig",
    "TrainConfig",
    "check_beam",
    "check_device",
    "check_experiment",
    "check_objective_of",
    "check_seed",
    "lengths_label",
    "model_schema",
    "plain_config",
    "seen_lengths",
    "span",
]
