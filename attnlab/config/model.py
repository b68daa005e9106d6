"""``model``: the reader's name and the encoder keys every reader may set. A reader's own
fields live in a subclass in its module, which checks them in its own ``check``.

The encoders (attnlab/models/encoders/<name>.py) are told apart here by what each one
registers (``EncoderRules``: the keys it reads, its check, the keys that shape its weights):
this layer imports nothing of the models', so an encoder module hands its rules down with
``add_encoder`` when it is imported (every reader's import imports them all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import MISSING

from attnlab.config.rules import require
from attnlab.errors import UserError

DEFAULT_ENCODER = "column"  # the lab's: a config without model.backbone (older runs) names it
# Keys every encoder reads; those that size its weights (fine-tuning keeps the source's).
SHARED_KEYS = ("stride", "normalize_strips", "hidden", "layers")
SHARED_SHAPE_KEYS = ("stride", "hidden", "layers")


@dataclass
class ModelConfig:
    """The reader's name, the encoder (``backbone``) and the keys of every encoder.

    Each reader's own fields live in a subclass declared in its module
    (``attnlab/models/readers/<name>.py``) and registered as ``model/<name>_schema``. The
    encoder keys below are read only by the encoders that declare them
    (``attnlab readers`` lists them by encoder); setting one the chosen encoder does not read
    is refused (``check_encoder_keys``).
    """

    name: str = MISSING  # a registered reader: attnlab.models.registry.names()
    # The encoder (the config group `encoder=NAME` sets it): attnlab/models/encoders/NAME.py
    backbone: str = "column"
    # A conv encoder's channels, one per stage; each stage halves the height (and the width
    # while `stride` asks for it), so data.height must divide by 2**len.
    conv_channels: list[int] = field(default_factory=lambda: [16, 32, 64, 128])
    # encoder=plain: each stage's max pool after its convolution, "RxC" (rows x columns, e.g.
    # 2x2, 2x1) or none; the columns' pools multiply to `stride`. [] = 2x2 while `stride`
    # asks, then 2x1.
    conv_pools: list[str] = field(default_factory=list)
    # A conv encoder's remaining rows: mean (averaged into one) | flatten (channels x rows
    # joined into each column's vector, as the tutorials' CRNN does; its size then depends on
    # data.height).
    conv_rows: str = "mean"
    # A conv encoder's column vectors, the BiGRU's input (its per-column linear layer's
    # size); 0 = 2 x hidden.
    conv_features: int = 0
    # Conv stem channels; [] = none: `stride` neighbouring pixel columns form one column.
    stem_channels: list[int] = field(default_factory=list)
    stride: int = 8  # pixel columns per encoder column (a power of two)
    # 1-D convolutions along the strip before the columns are stacked: each pixel column (its
    # H pixels, or the stem's channels x rows) is a vector; kernel 3, stride 1, ReLU. [] = none.
    column_convs: list[int] = field(default_factory=lambda: [64])
    normalize_strips: bool = True  # stretch each strip's grey levels to [0, 1] first
    column_mlp: int = 256  # hidden units of a per-column layer before the GRU; 0 = none
    column_norm: bool = True  # LayerNorm on the column features before the GRU
    hidden: int = 64  # encoder GRU hidden size per direction
    layers: int = 1  # encoder GRU layers

    @classmethod
    def check(cls, m: Any, height: int) -> None:
        """The shared fields, then the chosen encoder's own check; a reader's subclass checks
        its own after ``super().check``. ``height``: the strips' (data.height)."""
        for key in ("hidden", "layers"):
            require(getattr(m, key) >= 1, f"model.{key}", getattr(m, key), "must be >= 1")
        halvings = int(m.stride).bit_length() - 1
        ok = m.stride >= 1 and 2**halvings == m.stride
        require(ok, "model.stride", m.stride, "must be a power of two")
        encoder_rules(backbone_of(m)).check(m, height)


@dataclass(frozen=True)
class EncoderRules:
    """What the config layer knows of an encoder, handed down by its module."""

    name: str
    keys: tuple[str, ...]  # its own model keys (beyond SHARED_KEYS); each sizes its weights
    check: Callable[[Any, int], None]  # (model node, data.height): one UserError line
    description: str  # one line

    @property
    def shape_keys(self) -> tuple[str, ...]:
        """The keys fine-tuning (``init_from``) must leave as the source's."""
        return (*SHARED_SHAPE_KEYS, *self.keys)


_RULES: dict[str, EncoderRules] = {}


def add_encoder(rules: EncoderRules) -> None:
    """Called by ``attnlab.models.encoders.register`` when an encoder module is imported."""
    _RULES[rules.name] = rules


def encoder_names() -> list[str]:
    """The packaged encoders (the modules of attnlab/models/encoders/, the lab's first), read
    from the folder, and any other registered: the config layer imports nothing of the
    models' (attnlab.models.encoders.names() lists the same)."""
    from importlib.resources import files

    folder = files("attnlab").joinpath("models", "encoders")
    found = {p.name[:-3] for p in folder.iterdir() if p.name.endswith(".py") and p.name[0] != "_"}
    return [DEFAULT_ENCODER, *sorted((found | set(_RULES)) - {DEFAULT_ENCODER})]


def backbone_of(m: Any) -> str:
    return str(getattr(m, "backbone", None) or DEFAULT_ENCODER)


def encoder_rules(name: str) -> EncoderRules:
    """The rules of encoder ``name``; an unknown one is one UserError line."""
    known = encoder_names()
    require(name in known, "model.backbone", name, f"must be one of {'|'.join(known)}")
    if name not in _RULES:  # a packaged module not imported yet: no reader was loaded
        raise RuntimeError(f"encoder {name!r} is not loaded: import attnlab.models first")
    return _RULES[name]


def readers_of(key: str) -> list[str]:
    """The encoders that read model key ``key`` (every one for a shared key; [] for a key
    no encoder reads)."""
    if key in SHARED_KEYS:
        return sorted(_RULES)
    return sorted(n for n, r in _RULES.items() if key in r.keys)


def check_encoder_keys(m: Any, keys: Iterable[str]) -> None:
    """``keys``: the model keys a user set (``conv_channels``, from ``model.conv_channels=``).
    One the chosen encoder does not read, but another does, is refused in one line naming
    the encoders that read it: it would change nothing."""
    backbone = backbone_of(m)
    if backbone not in _RULES:  # an unknown encoder: ModelConfig.check names it
        return
    chosen = _RULES[backbone]
    for key in keys:
        others = [n for n in readers_of(key) if n != backbone]
        if others and key not in (*SHARED_KEYS, *chosen.keys):
            names = "|".join(others)
            raise UserError(
                f"model.{key}: encoder={backbone} does not read it, it is a key of "
                f"encoder={names} (choose that encoder, or leave model.{key} out)"
            )


def check_stages(m: Any, key: str, height: int, what: str, at_least_one: bool) -> None:
    """An encoder's list of stages (``model.<key>``): channels >= 1 each, at least
    log2(stride) of them (each may halve the width once), and data.height divisible by 2 per
    stage (each halves the height). For encoder modules' checks."""
    channels = list(m.get(key) if hasattr(m, "get") else getattr(m, key))
    ok = all(c >= 1 for c in channels) and (bool(channels) or not at_least_one)
    rule = "must be one or more numbers >= 1" if at_least_one else "must be >= 1 each"
    require(ok, f"model.{key}", channels, rule)
    halvings = int(m.stride).bit_length() - 1
    ok = (not channels and not at_least_one) or halvings <= len(channels)
    require(
        ok,
        "model.stride",
        m.stride,
        f"needs at least {halvings} {what}, model.{key} has {len(channels)}",
    )
    ok = height % (2 ** len(channels)) == 0
    require(ok, "data.height", height, f"must be divisible by {2 ** len(channels)} ({what})")


def keys_set_by(overrides: Iterable[str]) -> list[str]:
    """The model keys that Hydra overrides set (``model.KEY=``, ``+model.KEY=``,
    ``++model.KEY=``); overrides Hydra cannot parse set none (Hydra refuses them itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:
        return []
    keys = [o.key_or_group for o in parsed if not o.is_delete() and o.package is None]
    return [k.split(".", 1)[1] for k in keys if k.startswith("model.") and k.count(".") == 1]


def check_user_encoder_keys(cfg: Any) -> None:
    """``check_encoder_keys`` on the keys the command line set: those of ``cfg.hydra`` (a
    sweep's job, ``compose(hydra=True)``), else of the running Hydra task when ``cfg`` is
    its config (it holds every model value the task's command line set; a config composed
    beside the task, or after it in the same process, is not)."""
    from hydra.core.hydra_config import HydraConfig

    if "hydra" in cfg and cfg.hydra.get("overrides") is not None:
        keys = keys_set_by(cfg.hydra.overrides.task)
    elif HydraConfig.initialized():
        task = list(HydraConfig.get().overrides.task)
        keys = keys_set_by(task)
        values = _values_set_by(task) if keys else {}
        if any(_plain(cfg.model.get(k)) != v for k, v in values.items()):
            return
    else:
        return
    check_encoder_keys(cfg.model, keys)


def _values_set_by(overrides: list[str]) -> dict[str, Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = {}
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.key_or_group.startswith("model.") and not o.is_delete():
            try:
                out[o.key_or_group.split(".", 1)[1]] = _plain(o.value())
            except Exception:  # a sweep: not one job's value
                continue
    return out


def _plain(value: Any) -> Any:
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, enum_to_str=True)
    if isinstance(value, Enum):
        return value.name
    return list(value) if isinstance(value, (list, tuple)) else value
