"""Helpers shared by the reader tests: tiny configs composed the way the CLI composes them."""

from __future__ import annotations

import functools

import torch
from omegaconf import DictConfig

from attnlab.config import DataConfig
from attnlab.data.strips import StripBatch, StripSynth
from attnlab.models import registry
from attnlab.models.base import Reader
from attnlab.tasks.compose import compose


@functools.cache
def tiny_config(name: str, *overrides: str) -> DictConfig:
    """``attnlab train preset=tiny model=NAME`` as composed by Hydra (no run)."""
    return compose(["preset=tiny", f"model={name}", *overrides])


def clean_data(**overrides) -> DataConfig:
    """``data=clean`` (conf/data/clean.yaml: no variation at all) with some keys changed."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    clean = OmegaConf.to_container(OmegaConf.load(files("attnlab.conf") / "data" / "clean.yaml"))
    return DataConfig(**{**clean, **overrides})


def tiny_reader(name: str, *overrides: str, seed: int = 0) -> Reader:
    cfg = tiny_config(name, *overrides)
    torch.manual_seed(seed)
    return registry.build(cfg.model, cfg.data.height).eval()


def strips(lengths, seed: int = 0) -> StripBatch:
    gen = torch.Generator().manual_seed(seed)
    return StripSynth(DataConfig()).sample(torch.tensor(lengths), gen)
