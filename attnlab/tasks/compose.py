"""The one way code outside a Hydra task (the benchmark, tests, scripts) builds a config: as
the CLI's tasks compose it, every reader's schema registered first."""

from __future__ import annotations

from omegaconf import DictConfig


def compose(
    overrides: list[str] | tuple[str, ...] = (), config_name: str = "train", hydra: bool = False
) -> DictConfig:
    """The config ``attnlab train OVERRIDES`` (or another task's, by ``config_name``) would run
    with, composed by Hydra from ``attnlab.conf``; nothing runs and nothing is written.
    ``hydra``: with the ``hydra`` node (launcher, sweeper) as a multirun would see it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from attnlab.models import registry

    registry.discover()  # the readers' schemas are in the ConfigStore once their modules load
    if GlobalHydra.instance().is_initialized():  # e.g. inside a running task: compose beside it
        GlobalHydra.instance().clear()
    with initialize_config_module(config_module="attnlab.conf", version_base="1.3"):
        return hydra_compose(config_name, list(overrides), return_hydra_config=hydra)
