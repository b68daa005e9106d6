"""Column encoders by name (``encoder=NAME``, ``model.backbone``): each turns a batch of
strips into column states (B, T, 2H), their lengths in columns and a summary (B, 2H), with
padded columns masked, so that a reader asks for column states, never for a kind of encoder.

An encoder is one module in this package, named as the encoder is, plus
``conf/encoder/<name>.yaml`` (which makes it a choice of the config group). The module
registers its class with ``@register(name, description, keys, check)``:

- ``keys``: the model keys it reads beyond those every encoder reads (attnlab.config.model
  SHARED_KEYS); a key of another encoder set on the command line is refused, naming it, and
  ``init_from`` keeps them as the source's (they shape the weights);
- ``check(m, height)``: its keys' values, one UserError line each;
- the class: ``forward(images, widths) -> states, lengths, summary``, ``features(images,
  widths) -> (B, T, 2H), lengths`` (before the BiGRU), ``column_lengths``, ``state_size``,
  ``stride``, ``gru`` (None when built without its BiGRU), all from ``ColumnStates``
  (``_recurrent.py``, the BiGRU over the columns every encoder shares), and
  ``flop_terms(columns)``, its closed-form FLOPs (attnlab.models.costs) that a reader's
  ``flop_terms`` includes, so ``attnlab cost`` checks them with no change of its own.

Every module here is imported with the package, so the config layer (which imports nothing of
the models') knows every encoder's rules once any reader is loaded. Tests find the encoders
with ``names()``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnlab.config.model import DEFAULT_ENCODER as DEFAULT
from attnlab.config.model import EncoderRules, add_encoder, encoder_rules


@dataclass(frozen=True)
class EncoderSpec:
    name: str
    encoder: type  # an nn.Module subclass built as cls(cfg, height, recurrent)
    rules: EncoderRules  # its keys, check and description (attnlab.config.model)

    @property
    def description(self) -> str:
        return self.rules.description

    @property
    def keys(self) -> tuple[str, ...]:
        return self.rules.keys


_ENCODERS: dict[str, EncoderSpec] = {}


def register(
    name: str, description: str, keys: tuple[str, ...], check: Callable[[Any, int], None]
) -> Callable:
    """Class decorator: make ``cls`` the encoder called ``name``, reading ``keys`` (beyond the
    shared ones) and checking them with ``check(m, height)``."""

    def deco(cls: type) -> type:
        if name in _ENCODERS and _ENCODERS[name].encoder is not cls:
            raise ValueError(f"encoder name {name!r} is already taken")
        cls.name = name
        rules = EncoderRules(name, tuple(keys), check, description)
        _ENCODERS[name] = EncoderSpec(name, cls, rules)
        add_encoder(rules)
        return cls

    return deco


def names() -> list[str]:
    """The encoders, the lab's first."""
    return [DEFAULT, *sorted(n for n in _ENCODERS if n != DEFAULT)]


def get(name: str) -> EncoderSpec:
    encoder_rules(name)  # an unknown name: one UserError line naming the known ones
    return _ENCODERS[name]


def build(cfg: Any, height: int, recurrent: bool = True):
    """The encoder ``cfg.backbone`` names, for strips of ``height`` pixels."""
    return get(str(getattr(cfg, "backbone", None) or DEFAULT)).encoder(cfg, height, recurrent)


for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
