"""Structured configs: typed dataclasses registered in Hydra's ConfigStore.

The YAML files in ``attnlab.conf`` (the repo's ``conf/``) only choose values; every key and
type is declared here, so a misspelt key or a wrong type is a one-line composition error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


class Reader(str, Enum):
    fixed = "fixed"
    attention = "attention"


class Scorer(str, Enum):
    additive = "additive"
    dot = "dot"
    scaled_dot = "scaled_dot"


@dataclass
class DataConfig:
    """Synthetic strips. Ranges are ``[low, high]``; lengths are inclusive."""

    height: int = 32
    # Seen lengths: the inclusive range train_lengths=[lo, hi], unless train_length_set is given.
    train_lengths: list[int] = field(default_factory=lambda: [1, 8])
    train_length_set: list[int] | None = None
    # "bundled" = Pillow's font + matplotlib's TrueType fonts; other entries are paths or globs.
    fonts: list[str] = field(default_factory=lambda: ["bundled"])
    exclude_fonts: list[str] = field(default_factory=list)  # file-name substrings left out
    font_sizes: list[int] = field(default_factory=lambda: [22, 26, 30])  # px at height 32
    stroke_widths: list[int] = field(default_factory=lambda: [0, 1])
    variants: int = 8  # geometric variants rendered per glyph (scale, shear, rotation)
    scale: list[float] = field(default_factory=lambda: [0.85, 1.1])
    shear: list[float] = field(default_factory=lambda: [-0.25, 0.25])
    rotation: list[float] = field(default_factory=lambda: [-4.0, 4.0])  # degrees
    v_offset: int = 2  # max vertical shift of a glyph, px
    gap: list[int] = field(default_factory=lambda: [-1, 4])  # px between glyphs (<0 overlaps)
    margin: list[int] = field(default_factory=lambda: [2, 8])  # px left and right
    noise: list[float] = field(default_factory=lambda: [0.0, 0.06])  # std of pixel noise
    blur: list[float] = field(default_factory=lambda: [0.0, 0.8])  # Gaussian sigma, px
    contrast: list[float] = field(default_factory=lambda: [0.6, 1.0])
    background: list[float] = field(default_factory=lambda: [0.8, 1.0])
    val_per_length: int = 200  # strips per seen length in the fixed validation sets
    eval_seed: int = 20_240_808  # fixed evaluation sets derive their seeds from this


@dataclass
class ModelConfig:
    name: Reader = Reader.attention
    # Conv stem channels; [] = none: `stride` neighbouring pixel columns form one column.
    stem_channels: list[int] = field(default_factory=list)
    stride: int = 8  # pixel columns per encoder column (a power of two)
    normalize_strips: bool = True  # stretch each strip's grey levels to [0, 1] first
    column_mlp: int = 256  # hidden units of a per-column layer before the GRU; 0 = none
    column_norm: bool = True  # LayerNorm on the column features before the GRU
    hidden: int = 64  # encoder GRU hidden size per direction
    layers: int = 1  # encoder GRU layers
    dec_hidden: int = 128
    embed: int = 32
    attn_dim: int = 64
    scorer: Scorer = Scorer.additive


@dataclass
class OptimConfig:
    lr: float = 6e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    min_lr_ratio: float = 0.05  # cosine decay floor
    grad_clip: float = 1.0


@dataclass
class TrainConfig:
    steps: int = 2500
    batch_size: int = 128  # strips per micro-batch (x accumulate = per optimiser step)
    accumulate: int = 1
    val_every: int = 500
    log_every: int = 25
    checkpoint_every: int = 500
    examples_shown: int = 3  # truth | reading | confidence rows printed at each validation
    maps_logged: int = 3  # validation strips whose attention map goes to TensorBoard
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int = 0  # CPU threads; 0 = torch default (under submitit: the job CPU share)
    compile: bool = False
    bf16: bool = True  # autocast to bf16 on CUDA
    progress: str = "auto"  # auto | rich | plain


@dataclass
class EvalConfig:
    lengths: list[int] | None = None  # [lo, hi]; None = 1 .. twice the longest seen length
    n: int = 1000  # strips per length
    batch_size: int = 256
    beam: int = 1  # 1 = greedy
    folder: str | None = None  # evaluate on user strips (images + labels.csv) instead
    name: str | None = None  # output name under eval/; None = derived from source and decoding
    maps_k: int = 3  # correct readings and failures drawn per length
    map_lengths: list[int] | None = None  # None = a few seen and unseen lengths
    n_boot: int = 1000


@dataclass
class ExperimentConfig:
    """The config of ``attnlab train`` and of every sweep job."""

    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


@dataclass
class EvalTaskConfig:
    """The config of ``attnlab eval``: a run (or checkpoint) plus evaluation options."""

    run: str = MISSING
    checkpoint: str = "best"  # best | last, when ``run`` is a run directory
    device: str = "auto"
    eval: EvalConfig = field(default_factory=EvalConfig)


@dataclass
class PreviewConfig:
    out: str = "strips_preview.png"
    n: int = 24
    lengths: list[int] | None = None  # [lo, hi]; None = the seen lengths
    seed: int = 0


@dataclass
class ExportConfig:
    out: str = MISSING
    n: int = 100
    lengths: list[int] = field(default_factory=lambda: [1, 8])
    seed: int = 0


@dataclass
class DataTaskConfig:
    """The config of ``attnlab data preview`` and ``attnlab data export``."""

    data: DataConfig = field(default_factory=DataConfig)
    preview: PreviewConfig = field(default_factory=PreviewConfig)
    export: ExportConfig = field(default_factory=ExportConfig)


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="experiment_schema", node=ExperimentConfig)
    cs.store(name="eval_schema", node=EvalTaskConfig)
    cs.store(name="data_schema", node=DataTaskConfig)


register_configs()


def seen_lengths(data: DataConfig) -> list[int]:
    """The lengths a reader is trained on ("seen"), sorted."""
    if data.train_length_set:
        return sorted(set(int(n) for n in data.train_length_set))
    lo, hi = span(data.train_lengths, "data.train_lengths")
    return list(range(lo, hi + 1))


def span(pair: Any, key: str) -> tuple[int, int]:
    """A ``[low, high]`` length range, checked."""
    from attnlab.errors import UserError

    values = list(pair) if pair is not None else []
    if len(values) != 2 or not 1 <= int(values[0]) <= int(values[1]):
        raise UserError(f"{key} must be [low, high] with 1 <= low <= high, got {values}")
    return int(values[0]), int(values[1])
