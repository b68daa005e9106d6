"""Hydra's ConfigStore is shared, not copied, by every composition (``attnlab.config
.share_the_store``): the composed configs are the ones a copied store gives, and composing
never changes what the store holds."""

from __future__ import annotations

import copy

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from attnlab.tasks.compose import compose

COMMANDS = [
    ("train", ["preset=tiny", "model=attention"]),
    ("train", ["model=crnn", "encoder=resnet", "data.height=48"]),
    ("train", ["preset=tiny", "hydra/launcher=slurm"]),
    ("evaluate", []),
    ("tune", ["tune.trials=3"]),
    ("sweep", ["preset=tiny", "hydra/launcher=parallel"]),
]


def stored() -> str:
    """Every node in the store, as YAML, by its path."""

    def walk(d: dict, at: str) -> list[str]:
        out = []
        for name, v in sorted(d.items()):
            if isinstance(v, dict):
                out += walk(v, f"{at}{name}/")
            else:
                out.append(f"{at}{name} ({v.group}, {v.package}):\n{OmegaConf.to_yaml(v.node)}")
        return out

    return "\n".join(walk(ConfigStore.instance().repo, ""))


@pytest.mark.parametrize(("task", "overrides"), COMMANDS)
def test_a_shared_store_composes_what_a_copied_one_does(task, overrides, monkeypatch):
    store = ConfigStore.instance()
    assert copy.deepcopy(store) is store  # shared
    shared = OmegaConf.to_yaml(compose(overrides, config_name=task, hydra=True))
    before = stored()
    monkeypatch.delattr(ConfigStore, "__deepcopy__")  # Hydra's own: a copy per composition
    assert copy.deepcopy(store) is not store
    copied = OmegaConf.to_yaml(compose(overrides, config_name=task, hydra=True))
    assert shared == copied
    assert stored() == before  # composing changed nothing in the store
