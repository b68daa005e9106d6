"""``model``: the reader's name and the column encoder every reader shares. A reader's own
fields live in a subclass in its module, which checks them in its own ``check``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from attnlab.config.rules import require


@dataclass
class ModelConfig:
    """The reader's name and the column encoder every reader shares.

    Each reader's own fields live in a subclass declared in its module
    (``attnlab/models/readers/<name>.py``) and registered as ``model/<name>_schema``.
    """

    name: str = MISSING  # a registered reader: attnlab.models.registry.names()
    # The column encoder (the config group `encoder=column|vgg|resnet` sets it): `column`, the
    # lab's, uses the stem/column keys below; `vgg` and `resnet` use conv_channels.
    backbone: str = "column"
    # vgg and resnet: channels of each conv stage; each stage halves the height (and the
    # width while `stride` asks for it), so data.height must divide by 2**len.
    conv_channels: list[int] = field(default_factory=lambda: [16, 32, 64, 128])
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
        """The shared fields; a reader's subclass checks its own after ``super().check``.
        ``height``: the strips' (data.height), which the encoder's stem must divide."""
        for key in ("hidden", "layers"):
            require(getattr(m, key) >= 1, f"model.{key}", getattr(m, key), "must be >= 1")
        require(m.column_mlp >= 0, "model.column_mlp", m.column_mlp, "must be >= 0 (0 = none)")
        backbone, known = str(getattr(m, "backbone", "column")), encoder_names()
        require(backbone in known, "model.backbone", backbone, f"must be one of {'|'.join(known)}")
        if backbone != "column":
            cls._check_conv(m, height)
            return
        channels = list(m.stem_channels)
        require(all(c >= 1 for c in channels), "model.stem_channels", channels, "must be >= 1 each")
        halvings = int(m.stride).bit_length() - 1
        ok = m.stride >= 1 and 2**halvings == m.stride
        require(ok, "model.stride", m.stride, "must be a power of two")
        ok = not channels or halvings <= len(channels)
        require(
            ok,
            "model.stride",
            m.stride,
            f"needs at least {halvings} stem layers, model.stem_channels has {len(channels)}",
        )
        ok = height % (2 ** len(channels)) == 0
        require(ok, "data.height", height, f"must be divisible by {2 ** len(channels)} (stem)")

    @staticmethod
    def _check_conv(m: Any, height: int) -> None:
        """The conv encoders' (vgg, resnet) keys."""
        channels = list(m.conv_channels)
        ok = bool(channels) and all(c >= 1 for c in channels)
        require(ok, "model.conv_channels", channels, "must be one or more numbers >= 1")
        halvings = int(m.stride).bit_length() - 1
        ok = m.stride >= 1 and 2**halvings == m.stride
        require(ok, "model.stride", m.stride, "must be a power of two")
        stages = f"needs at least {halvings} conv stages, model.conv_channels has {len(channels)}"
        require(halvings <= len(channels), "model.stride", m.stride, stages)
        ok = height % (2 ** len(channels)) == 0
        require(
            ok, "data.height", height, f"must be divisible by {2 ** len(channels)} (conv stages)"
        )


def encoder_names() -> list[str]:
    """The packaged encoders (the modules of attnlab/models/encoders/, the lab's first), read
    from the folder: the config layer imports nothing of the models' (attnlab.models.encoders
    .names() lists the same)."""
    from importlib.resources import files

    folder = files("attnlab").joinpath("models", "encoders")
    found = sorted(
        p.name[:-3] for p in folder.iterdir() if p.name.endswith(".py") and p.name[0] != "_"
    )
    return ["column", *(n for n in found if n != "column")]
