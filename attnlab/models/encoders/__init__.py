"""Column encoders by name (``encoder=column|vgg|resnet``, ``model.backbone``): each turns a
batch of strips into column states (B, T, 2H), their lengths in columns and a summary (B, 2H),
with padded columns masked, so that a reader asks for column states, never for a kind of
encoder.

One module per encoder in this package, named as the encoder is, registering its class with
``@register``; ``conf/encoder/<name>.yaml`` makes it a choice of the config group. Every
encoder has the same surface: ``forward(images, widths) -> states, lengths, summary``,
``features(images, widths) -> (B, T, 2H), lengths`` (before the BiGRU), ``column_lengths``,
``state_size``, ``stride``, ``gru`` (None when built without its BiGRU) and
``flop_terms(columns)``, its closed-form FLOPs (attnlab.models.costs) that a reader's
``flop_terms`` includes, so ``attnlab cost`` checks them with no change of its own.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnlab.errors import UserError

DEFAULT = "column"  # the lab's encoder: old checkpoints (no model.backbone) name it


@dataclass(frozen=True)
class EncoderSpec:
    name: str
    encoder: type  # an nn.Module subclass built as cls(cfg, height, recurrent)
    description: str  # one line


_ENCODERS: dict[str, EncoderSpec] = {}


def register(name: str, description: str) -> Callable:
    """Class decorator: make ``cls`` the encoder called ``name``."""

    def deco(cls: type) -> type:
        if name in _ENCODERS and _ENCODERS[name].encoder is not cls:
            raise ValueError(f"encoder name {name!r} is already taken")
        cls.name = name
        _ENCODERS[name] = EncoderSpec(name, cls, description)
        return cls

    return deco


def names() -> list[str]:
    """The packaged encoders, the lab's first; found without importing them (torch-free, for
    the config check)."""
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [DEFAULT, *(n for n in found if n != DEFAULT)]


def get(name: str) -> EncoderSpec:
    if name not in names():
        raise UserError(f"model.backbone={name!r}: unknown encoder; one of {'|'.join(names())}")
    importlib.import_module(f"{__name__}.{name}")
    return _ENCODERS[name]


def build(cfg: Any, height: int, recurrent: bool = True):
    """The encoder ``cfg.backbone`` names, for strips of ``height`` pixels."""
    return get(str(getattr(cfg, "backbone", DEFAULT))).encoder(cfg, height, recurrent)
