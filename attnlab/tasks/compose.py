"""The one way code outside a Hydra task (the benchmark, tests, scripts) builds a config: as
the CLI's tasks compose it, every reader's schema registered first, and for ``train`` with
what ``attnlab.tasks.recipe`` adds to the command (the own-strips recipe, ``init_from``'s
reader), as ``attnlab train`` adds it."""

from __future__ import annotations

from omegaconf import DictConfig

from attnlab.config.model import check_encoder_keys, keys_set_by


def compose(
    overrides: list[str] | tuple[str, ...] = (), config_name: str = "train", hydra: bool = False
) -> DictConfig:
    """The config ``attnlab train OVERRIDES`` (or another task's, by ``config_name``) would run
    with, composed by Hydra from ``attnlab.conf``; nothing runs and nothing is written.
    ``hydra``: with the ``hydra`` node (launcher, sweeper) as a multirun would see it."""
    overrides = list(overrides)
    if config_name == "train":
        from attnlab.tasks.recipe import resolve

        resolved = resolve(overrides)
        given, overrides = overrides, overrides + (resolved.keys if resolved else [])
    cfg = compose_as_given(overrides, config_name, hydra)
    if config_name == "train":  # a key the chosen encoder does not read, refused by name
        check_encoder_keys(cfg.model, keys_set_by(given))
    return cfg


def compose_as_given(
    overrides: list[str], config_name: str = "train", hydra: bool = False
) -> DictConfig:
    """``compose`` of ``overrides`` exactly as given. Inside a running Hydra app (a task's
    first step) the app's own Hydra is set aside while this composes and put back after."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.singleton import Singleton

    from attnlab.models import registry

    registry.discover()  # the readers' schemas are in the ConfigStore once their modules load
    running = Singleton._instances.pop(GlobalHydra, None)  # e.g. the task's own Hydra
    try:
        with initialize_config_module(config_module="attnlab.conf", version_base="1.3"):
            return hydra_compose(config_name, overrides, return_hydra_config=hydra)
    finally:
        if running is not None:
            Singleton._instances[GlobalHydra] = running
