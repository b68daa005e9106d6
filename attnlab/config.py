"""Structured configs: typed dataclasses registered in Hydra's ConfigStore.

The YAML files in ``attnlab.conf`` (the repo's ``conf/``) only choose values; every key and
type is declared here, so a misspelt key or a wrong type is a one-line composition error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class DataConfig:
    """Synthetic strips. Ranges are ``[low, high]``; lengths are inclusive."""

    height: int = 32
    # Seen lengths: the inclusive range train_lengths=[lo, hi], unless train_length_set is given.
    train_lengths: list[int] = field(default_factory=lambda: [1, 8])
    train_length_set: list[int] | None = None
    # true: every training batch holds strips of one seen length, drawn in proportion to its
    # tokens (digits + EOS), the expected gradient of mixed batches; no padding at all, so
    # 1.1x (2 threads) to 1.2x (1 thread) the strips/s of packed mixed batches. Opt-in: for
    # the same training time the attention reader reads 0-1.3 points worse, the fixed-context
    # reader ~4 (closing note, #11). false: lengths drawn uniformly for each strip of a batch.
    batch_by_length: bool = False
    # Fonts shipped in Python packages: "bundled" = Pillow's font + matplotlib's TrueType
    # fonts, "reportlab" = ReportLab's Arial, Times New Roman and Courier, and the font
    # packages' typefaces by package name (attnlab.data.fonts.FONT_SETS); other entries
    # are paths or globs (system fonts).
    fonts: list[str] = field(
        default_factory=lambda: [
            "bundled", "reportlab", "pymupdf-fonts", "font-lato", "font-source-serif-pro"
        ]
    )  # fmt: skip
    exclude_fonts: list[str] = field(default_factory=list)  # file-name substrings left out
    font_sizes: list[int] = field(default_factory=lambda: [22, 26, 30])  # px at height 32
    stroke_widths: list[int] = field(default_factory=lambda: [0, 1])
    marked_zeros: float = 0.3  # share of renderings whose zero has a dot or a slash (monospace)
    oldstyle: float = 0.15  # share of renderings drawn with old-style (text) figures
    footless_ones: float = 0.3  # share of renderings whose 1 loses its foot (Arial's 1)
    variants: int = 8  # geometric variants per glyph (scale, stretch, shear, rotation)
    scale: list[float] = field(default_factory=lambda: [0.85, 1.1])
    stretch: list[float] = field(default_factory=lambda: [0.8, 1.25])  # glyph width x, on scale
    shear: list[float] = field(default_factory=lambda: [-0.25, 0.25])
    rotation: list[float] = field(default_factory=lambda: [-4.0, 4.0])  # degrees
    # Max displacement (px) of a smooth warp bending each variant's strokes (elastic); 0 = none.
    # Opt-in: 1 px changed no left-out family beyond run-to-run variation (closing note, #11).
    elastic: float = 0.0
    v_offset: int = 2  # max vertical shift of a glyph, px
    gap: list[int] = field(default_factory=lambda: [-1, 4])  # px between glyphs (<0 overlaps)
    margin: list[int] = field(default_factory=lambda: [2, 8])  # px left and right
    noise: list[float] = field(default_factory=lambda: [0.0, 0.06])  # std of pixel noise
    blur: list[float] = field(default_factory=lambda: [0.0, 0.8])  # Gaussian sigma, px
    contrast: list[float] = field(default_factory=lambda: [0.6, 1.0])
    background: list[float] = field(default_factory=lambda: [0.8, 1.0])
    # Training augmentation: whole-strip variation after the glyphs are placed, for the
    # training stream only (validation, test and probe sets and exports are the generator's
    # strips without it, so runs trained with other augmentation are read on the same sets).
    # Geometry is vertical only, so every glyph keeps its columns and its span stays true.
    augmented: float = 0.5  # share of training strips that get the variation below
    dilate: float = 0.2  # share of strips whose ink is thickened by one pixel (morphology)
    ink_level: list[float] = field(default_factory=lambda: [-0.4, 0.3])  # <0 thins, >0 bolds
    strip_scale: list[float] = field(default_factory=lambda: [0.85, 1.15])  # vertical, whole
    strip_shift: float = 2.0  # max vertical shift of the whole string, px
    wave: float = 1.0  # max amplitude of a smooth vertical wave along the strip (elastic), px
    resample: list[float] = field(default_factory=lambda: [0.5, 1.0])  # down, then back up
    shading: float = 0.15  # max darkening of the paper across the strip (a linear ramp)
    jpeg: float = 0.0  # share of those strips JPEG-compressed (block DCT, standard table)
    jpeg_quality: list[float] = field(default_factory=lambda: [15.0, 75.0])  # JPEG quality
    val_per_length: int = 200  # strips per seen length in the fixed validation sets
    eval_seed: int = 20_240_808  # fixed evaluation sets derive their seeds from this
    # --- labelled strips (data=folder; attnlab.data.sources, attnlab.data.source_train) ---
    source: str = "synthetic"  # synthetic | folder (data=folder sets it)
    # data=folder: a folder with labels.csv, a list file (path<TAB>label) or an LMDB
    # (num-samples, image-%09d, label-%09d). Strips of the seen lengths train the reader.
    path: str | None = None
    val_path: str | None = None  # validation and test strips; None = a share of data.path
    val_share: float = 0.1  # of data.path, held out (seeded by eval_seed), never trained on
    mix: float = 0.0  # share of synthetic strips in each training batch (data=folder)
    crop: bool = True  # ink placed as the generator places it, as eval.crop does
    skip_long: bool = False  # labels too long for the reader: skipped (counted), not refused
    charset: str = "0123456789"  # the characters a label may hold; the readers' vocabulary


@dataclass
class ModelConfig:
    """The reader's name and the column encoder every reader shares.

    Each reader's own fields live in a subclass declared in its module
    (``attnlab/models/readers/<name>.py``) and registered as ``model/<name>_schema``.
    """

    name: str = MISSING  # a registered reader: attnlab.models.registry.names()
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
    # What the task returns to a Hydra sweeper (Optuna, Nevergrad, Ax): one of OBJECTIVES,
    # e.g. val_exact (maximize). None: the task returns its metrics as a dict, as always.
    objective: str | None = None


# train.objective -> (direction to give the sweeper, where it is measured). "validation":
# the best checkpoint's validation sets (attnlab train and sweep jobs); "evaluation": the
# test sets of the job's evaluation (attnlab sweep lengths only: it evaluates).
OBJECTIVES = {
    "val_exact": ("maximize", "validation"),
    "val_cer": ("minimize", "validation"),
    "seen_exact": ("maximize", "evaluation"),
    "unseen_exact": ("maximize", "evaluation"),
    "seen_cer": ("minimize", "evaluation"),
    "unseen_cer": ("minimize", "evaluation"),
}


@dataclass
class EvalConfig:
    lengths: list[int] | None = None  # [lo, hi]; None = 1 .. twice the longest seen length
    n: int = 1000  # strips per length
    batch_size: int = 256
    beam: int = 1  # 1 = greedy
    folder: str | None = None  # evaluate on user strips (images + labels.csv) instead
    crop: bool = True  # folder strips: ink placed as the generator places it, before resizing
    allow_outside: bool = False  # folder: labels.csv may name files outside it (../x, /abs)
    name: str | None = None  # output name under eval/; None = derived from source and decoding
    maps_k: int = 3  # correct readings and failures drawn per length
    map_lengths: list[int] | None = None  # None = a few seen and unseen lengths
    head_maps: int = 1  # per map length: correct readings and failures drawn head by head
    n_boot: int = 1000
    oracle_length: bool = False  # also read with EOS forced at exactly the true length
    ece_bins: int = 10  # equal-mass bins of the calibration error and reliability diagram
    thresholds: list[float] = field(default_factory=lambda: [0.5, 0.9, 0.99])
    failures_shown: int = 10  # most confident failures printed
    # explore.json (the report's explorer): the first explore_n strips of each length, with
    # image, spans, reading, per-step confidences and attention rows; 0 = none written.
    # 32: a default sweep's page (6 runs x 16 lengths) gains about 2.3 MB (README).
    explore_n: int = 32


@dataclass
class ExperimentConfig:
    """The config of ``attnlab train`` and of every sweep job."""

    seed: int = 0
    # A run directory (its best.pt) or checkpoint to start from: what fits is loaded, the
    # rest (another charset's output layer) re-initialised and listed (attnlab.finetune).
    init_from: str | None = None
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = MISSING  # the config group `model` chooses a reader's subclass
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


@dataclass
class RunTaskConfig:
    """What every task working on a trained run takes: the run (or a checkpoint file)."""

    run: str = MISSING
    checkpoint: str = "best"  # best | last, when ``run`` is a run directory
    device: str = "auto"


@dataclass
class EvalTaskConfig(RunTaskConfig):
    """The config of ``attnlab eval``: a run (or checkpoint) plus evaluation options."""

    eval: EvalConfig = field(default_factory=EvalConfig)


@dataclass
class PreviewConfig:
    out: str = "strips_preview.png"
    n: int = 24
    lengths: list[int] | None = None  # [lo, hi]; None = the seen lengths
    seed: int = 0
    augment: bool = True  # as the training stream draws them (false: as test sets are)
    force: bool = False  # replace an existing preview.out


@dataclass
class ExportConfig:
    out: str = MISSING
    n: int = 100
    lengths: list[int] = field(default_factory=lambda: [1, 8])
    seed: int = 0
    format: str = "folder"  # folder (PNGs + labels.csv) | lmdb (strhub/DTRB layout)
    force: bool = False  # replace files of an earlier export (labels.csv, PNGs)


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


def seen_lengths(data: Any) -> list[int]:
    """The lengths a reader is trained on ("seen"), sorted; ``data`` is a DataConfig or the
    ``data`` node of a run's saved config."""
    if data.train_length_set:
        return sorted(set(int(n) for n in data.train_length_set))
    lo, hi = span(data.train_lengths, "data.train_lengths")
    return list(range(lo, hi + 1))


def lengths_label(lengths: list[int]) -> str:
    """One label for a set of lengths: "1-8" when contiguous, else "2,4,6". Equal sets get
    equal labels, however they were configured."""
    seen = sorted(set(int(n) for n in lengths))
    if not seen:
        return "?"
    if seen == list(range(seen[0], seen[-1] + 1)):
        return f"{seen[0]}-{seen[-1]}"
    return ",".join(map(str, seen))


def span(pair: Any, key: str) -> tuple[int, int]:
    """A ``[low, high]`` length range, checked."""
    from attnlab.errors import UserError

    values = list(pair) if pair is not None else []
    if len(values) != 2 or not 1 <= int(values[0]) <= int(values[1]):
        raise UserError(f"{key} must be [low, high] with 1 <= low <= high, got {values}")
    return int(values[0]), int(values[1])


# ---------------------------------------------------------------------------------------------
# Value checks: types come from the schema; these are the values a type cannot rule out.
# Every task calls the check of its config before it writes anything.


def _finite(x: Any) -> bool:
    import math

    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _require(ok: bool, key: str, value: Any, rule: str) -> None:
    from attnlab.errors import UserError

    if not ok:
        raise UserError(f"{key}={value!r}: {rule}")


def _check_pairs(section: Any, prefix: str, keys: list[str], low: float = 0.0) -> None:
    for key in keys:
        pair = list(getattr(section, key))
        ok = len(pair) == 2 and all(_finite(v) for v in pair) and low <= pair[0] <= pair[1]
        _require(ok, f"{prefix}.{key}", pair, f"must be [low, high] with {low:g} <= low <= high")


def check_sources(d: Any) -> None:
    """The labelled-strip keys (data=folder)."""
    ok = d.source in ("synthetic", "folder")
    _require(ok, "data.source", d.source, "must be synthetic or folder (data=folder)")
    if d.source == "folder":
        need = "data=folder needs data.path=PATH (labels.csv folder, list file or LMDB)"
        _require(bool(d.path), "data.path", d.path, need)
    share = d.val_share
    _require(_finite(share) and 0 <= share <= 0.9, "data.val_share", share, "must be in [0, 0.9]")
    ok = d.source != "folder" or share > 0 or bool(d.val_path)
    _require(ok, "data.val_share", share, "must be > 0 unless data.val_path is given")
    _require(_finite(d.mix) and 0 <= d.mix < 1, "data.mix", d.mix, "must be in [0, 1)")
    chars = str(d.charset)
    ok = len(chars) >= 1 and len(set(chars)) == len(chars) and not any(c.isspace() for c in chars)
    _require(ok, "data.charset", chars, "must list each character once, no spaces")
    # Synthetic strips draw any character some font renders (attnlab.data.glyphs refuses one
    # that none does, naming it, before a run writes anything).


def check_data(d: Any) -> None:
    check_sources(d)
    _require(d.height >= 16, "data.height", d.height, "must be >= 16 px")
    if d.train_length_set is not None:
        values = list(d.train_length_set)
        _require(
            bool(values) and all(int(v) >= 1 for v in values),
            "data.train_length_set", values, "must list lengths >= 1",
        )  # fmt: skip
    else:
        span(d.train_lengths, "data.train_lengths")
    sizes = list(d.font_sizes)
    _require(
        bool(sizes) and all(s >= 4 for s in sizes), "data.font_sizes", sizes, "must be >= 4 px"
    )
    _require(
        all(s >= 0 for s in d.stroke_widths),
        "data.stroke_widths",
        list(d.stroke_widths),
        "must be >= 0",
    )
    _require(d.variants >= 1, "data.variants", d.variants, "must be >= 1")
    _require(d.v_offset >= 0, "data.v_offset", d.v_offset, "must be >= 0")
    _require(d.val_per_length >= 1, "data.val_per_length", d.val_per_length, "must be >= 1")
    _check_pairs(d, "data", ["scale", "stretch"], low=0.1)
    _check_pairs(d, "data", ["noise", "blur", "contrast", "background"])
    _check_pairs(d, "data", ["shear", "rotation"], low=-90.0)
    _check_pairs(d, "data", ["gap"], low=-64.0)
    _check_pairs(d, "data", ["margin"])
    _check_pairs(d, "data", ["strip_scale"], low=0.1)
    _check_pairs(d, "data", ["ink_level"], low=-0.9)
    _require(d.ink_level[1] <= 0.9, "data.ink_level", list(d.ink_level), "must be in [-0.9, 0.9]")
    _check_pairs(d, "data", ["resample"], low=0.1)
    _check_pairs(d, "data", ["jpeg_quality"], low=1.0)
    _require(
        d.jpeg_quality[1] <= 100, "data.jpeg_quality", list(d.jpeg_quality), "must be in [1, 100]"
    )
    _require(d.resample[1] <= 1.0, "data.resample", list(d.resample), "must be factors <= 1")
    for key, high in (
        ("dilate", 1.0), ("shading", 0.9), ("strip_shift", 16.0), ("wave", 8.0),
        ("marked_zeros", 1.0), ("oldstyle", 1.0), ("footless_ones", 1.0), ("augmented", 1.0),
        ("elastic", 4.0), ("jpeg", 1.0),
    ):  # fmt: skip
        value = getattr(d, key)
        _require(
            _finite(value) and 0 <= value <= high, f"data.{key}", value, f"must be in [0, {high:g}]"
        )


def check_model(m: Any) -> None:
    for key in ("hidden", "layers"):
        _require(getattr(m, key) >= 1, f"model.{key}", getattr(m, key), "must be >= 1")
    for key in ("dec_hidden", "embed", "attn_dim"):
        if key in m:
            _require(getattr(m, key) >= 1, f"model.{key}", getattr(m, key), "must be >= 1")
    _require(m.column_mlp >= 0, "model.column_mlp", m.column_mlp, "must be >= 0 (0 = none)")
    _require(
        all(c >= 1 for c in m.stem_channels),
        "model.stem_channels",
        list(m.stem_channels),
        "must be >= 1 each",
    )


def check_beam(beam: Any, key: str) -> None:
    """The beam width of eval and of read: one rule for both."""
    _require(isinstance(beam, int) and beam >= 1, key, beam, "must be >= 1 (1 = greedy)")


MAX_EVAL_LENGTH = 64  # the longest evaluated string: 8x the default seen range


def check_eval(e: Any, prefix: str = "eval") -> None:
    _require(e.n >= 1, f"{prefix}.n", e.n, "must be >= 1 strips per length")
    _require(e.batch_size >= 1, f"{prefix}.batch_size", e.batch_size, "must be >= 1")
    check_beam(e.beam, f"{prefix}.beam")
    _require(e.maps_k >= 0, f"{prefix}.maps_k", e.maps_k, "must be >= 0")
    _require(e.head_maps >= 0, f"{prefix}.head_maps", e.head_maps, "must be >= 0")
    _require(e.n_boot >= 0, f"{prefix}.n_boot", e.n_boot, "must be >= 0")
    _require(e.ece_bins >= 1, f"{prefix}.ece_bins", e.ece_bins, "must be >= 1")
    _require(e.explore_n >= 0, f"{prefix}.explore_n", e.explore_n, "must be >= 0 (0 = none)")
    _require(
        all(_finite(t) and 0 <= t <= 1 for t in e.thresholds),
        f"{prefix}.thresholds", list(e.thresholds), "must be confidences in [0, 1]",
    )  # fmt: skip
    if e.lengths is not None:
        lo, hi = span(e.lengths, f"{prefix}.lengths")
        _require(hi <= MAX_EVAL_LENGTH, f"{prefix}.lengths", [lo, hi],
                 f"must stay within {MAX_EVAL_LENGTH} digits (each length is a set of eval.n "
                 f"strips read step by step)")  # fmt: skip


def check_experiment(cfg: Any) -> None:
    """Every value check of a training config; one UserError naming the key."""
    from attnlab.checks import check_device, check_seed, check_size

    check_seed(cfg.seed)
    check_data(cfg.data)
    check_model(cfg.model)
    check_device(cfg.train.device, "train.device")
    o, t = cfg.optim, cfg.train
    _require(_finite(o.lr) and o.lr > 0, "optim.lr", o.lr, "must be a finite number > 0")
    _require(
        _finite(o.weight_decay) and o.weight_decay >= 0,
        "optim.weight_decay",
        o.weight_decay,
        "must be finite and >= 0",
    )
    _require(o.warmup_steps >= 0, "optim.warmup_steps", o.warmup_steps, "must be >= 0")
    _require(
        _finite(o.min_lr_ratio) and 0 <= o.min_lr_ratio <= 1,
        "optim.min_lr_ratio",
        o.min_lr_ratio,
        "must be in [0, 1]",
    )
    _require(
        _finite(o.grad_clip) and o.grad_clip > 0,
        "optim.grad_clip",
        o.grad_clip,
        "must be a finite number > 0",
    )
    for key in ("steps", "batch_size", "accumulate", "val_every", "log_every", "checkpoint_every"):
        _require(getattr(t, key) >= 1, f"train.{key}", getattr(t, key), "must be >= 1")
    _require(t.batch_size <= 65536, "train.batch_size", t.batch_size,
             "is too large to allocate; use a smaller batch with train.accumulate=K")  # fmt: skip
    _require(t.examples_shown >= 0 and t.maps_logged >= 0, "train.examples_shown/maps_logged",
             (t.examples_shown, t.maps_logged), "must be >= 0")  # fmt: skip
    _require(t.threads >= 0, "train.threads", t.threads, "must be >= 0 (0 = default)")
    _require(
        t.progress in ("auto", "rich", "plain"),
        "train.progress",
        t.progress,
        "must be auto, rich or plain",
    )
    if t.objective is not None:
        _require(
            t.objective in OBJECTIVES, "train.objective", t.objective,
            f"must be one of {', '.join(OBJECTIVES)} (or null: return the metrics)",
        )  # fmt: skip
    check_eval(cfg.eval)
    check_size(cfg.model, cfg.data.height)


# ---------------------------------------------------------------------------------------------
# `attnlab probe`: interventions on correctly read strips (attnlab.probe, attnlab.interventions).


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


@dataclass
class ProbeTaskConfig(RunTaskConfig):
    """The config of ``attnlab probe``: a run (or checkpoint) plus probe options."""

    probe: ProbeConfig = field(default_factory=ProbeConfig)


ConfigStore.instance().store(name="probe_schema", node=ProbeTaskConfig)


def check_probe(p: Any, prefix: str = "probe") -> None:
    for key in ("n", "pool", "batch_size"):
        _require(getattr(p, key) >= 1, f"{prefix}.{key}", getattr(p, key), "must be >= 1")
    _require(p.swaps >= 0, f"{prefix}.swaps", p.swaps, "must be >= 0 (0 = no glyph swap)")
    _require(p.n_boot >= 0, f"{prefix}.n_boot", p.n_boot, "must be >= 0")
    if p.lengths is not None:
        values = list(p.lengths)
        _require(
            bool(values) and all(int(v) >= 1 for v in values),
            f"{prefix}.lengths", values, "must list lengths >= 1",
        )  # fmt: skip
    if p.example_length is not None:
        _require(
            p.example_length >= 1, f"{prefix}.example_length", p.example_length, "must be >= 1"
        )
    if p.name is not None:
        name = str(p.name)
        _require(
            bool(name) and "/" not in name and not name.startswith("."),
            f"{prefix}.name", name, "must be a plain folder name (no '/', not hidden)",
        )  # fmt: skip
