"""The configs of the tasks that work on a trained run (eval, probe) or on strips alone (data
preview, data export), each with its own ``check``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from attnlab.config.experiment import EvalConfig, ExperimentConfig
from attnlab.config.rules import check_at_least, check_device, check_name, check_seed, require, span


@dataclass
class RunTaskConfig:
    """What every task working on a trained run takes: the run (or a checkpoint file)."""

    run: str = MISSING
    checkpoint: str = "best"  # best | last, when ``run`` is a run directory
    device: str = "auto"

    @classmethod
    def check_run(cls, which: Any, device: Any) -> None:
        """The run's part (eval, probe and read take these apart from their own section)."""
        require(which in ("best", "last"), "checkpoint", which, "must be best or last")
        check_device(device, "device")


@dataclass
class EvalTaskConfig(RunTaskConfig):
    """The config of ``attnlab eval``: a run (or checkpoint) plus evaluation options."""

    eval: EvalConfig = field(default_factory=EvalConfig)
    # An export of this run's checkpoint (attnlab export): read through the ONNX reference
    # loop instead of torch, into eval/<name>-onnx.
    onnx: str | None = None


@dataclass
class ProbeConfig:
    # The lengths probed, each one (a list, not a range); None = the middle and the top of the
    # seen lengths, two beyond the top and twice the top.
    lengths: list[int] | None = None
    n: int = 20  # correctly read strips probed per length (fewer when the pool has fewer)
    pool: int = 100  # strips per length read to find them (the fixed "probe" set)
    swaps: int = 1  # glyph swaps per strip, each at its own position
    saliency: bool = True  # attention vs gradient x input, for readers with weights
    batch_size: int = 256  # images per forward pass (a strip's occluded variants stay together)
    n_boot: int = 1000  # bootstrap resamples (of strips) of every interval
    seed: int = 0  # which other glyph is "random", which glyph is swapped, the bootstrap
    name: str | None = None  # output name under probe/; None = "synthetic"
    example_length: int | None = None  # the example figure's length; None = longest seen probed

    @classmethod
    def check(cls, p: Any, prefix: str = "probe") -> None:
        check_at_least(p, prefix, ("n", "pool", "batch_size"))
        require(p.swaps >= 0, f"{prefix}.swaps", p.swaps, "must be >= 0 (0 = no glyph swap)")
        require(p.n_boot >= 0, f"{prefix}.n_boot", p.n_boot, "must be >= 0")
        if p.lengths is not None:
            values = list(p.lengths)
            ok = bool(values) and all(int(v) >= 1 for v in values)
            require(ok, f"{prefix}.lengths", values, "must list lengths >= 1")
        if p.example_length is not None:
            ok = p.example_length >= 1
            require(ok, f"{prefix}.example_length", p.example_length, "must be >= 1")
        if p.name is not None:
            check_name(p.name, f"{prefix}.name")


@dataclass
class ProbeTaskConfig(RunTaskConfig):
    """The config of ``attnlab probe``: a run (or checkpoint) plus probe options."""

    probe: ProbeConfig = field(default_factory=ProbeConfig)


@dataclass
class PreviewConfig:
    out: str = "strips_preview.png"
    n: int = 24
    lengths: list[int] | None = None  # [lo, hi]; None = the seen lengths
    seed: int = 0
    augment: bool = True  # as the training stream draws them (false: as test sets are)
    force: bool = False  # replace an existing preview.out

    @classmethod
    def check(cls, p: Any, prefix: str = "preview") -> None:
        require(p.n >= 1, f"{prefix}.n", p.n, "must be >= 1")
        check_seed(p.seed, f"{prefix}.seed")
        if p.lengths is not None:
            span(p.lengths, f"{prefix}.lengths")


@dataclass
class ExportConfig:
    out: str = MISSING
    n: int = 100
    lengths: list[int] = field(default_factory=lambda: [1, 8])
    seed: int = 0
    format: str = "folder"  # folder (PNGs + labels.csv) | lmdb (strhub/DTRB layout)
    force: bool = False  # replace files of an earlier export (labels.csv, PNGs)

    @classmethod
    def check(cls, e: Any, prefix: str = "export") -> None:
        require(e.n >= 1, f"{prefix}.n", e.n, "must be >= 1")
        check_seed(e.seed, f"{prefix}.seed")
        span(e.lengths, f"{prefix}.lengths")
        require(
            e.format in ("folder", "lmdb"), f"{prefix}.format", e.format, "must be folder or lmdb"
        )


@dataclass
class DataTaskConfig(ExperimentConfig):
    """The config of ``attnlab data preview`` and ``attnlab data export``: a training config
    (so every override of ``attnlab train`` applies, ``preset=tiny`` and ``data=clean``
    included: the strips shown are those that training would draw) plus their own sections."""

    preview: PreviewConfig = field(default_factory=PreviewConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
