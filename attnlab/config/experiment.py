"""The config of ``attnlab train`` and of every sweep job: its sections, their checks, and the
helpers that read it (seen lengths, plain values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from attnlab.config.data import DataConfig
from attnlab.config.model import ModelConfig, check_user_encoder_keys
from attnlab.config.rules import (
    check_at_least,
    check_beam,
    check_device,
    check_seed,
    finite,
    require,
    span,
)
from attnlab.errors import UserError

MAX_EVAL_LENGTH = 64  # the longest evaluated string: 8x the default seen range


@dataclass
class OptimConfig:
    lr: float = 6e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    min_lr_ratio: float = 0.05  # the floor cosine and onecycle decay to (linear: to zero)
    grad_clip: float = 1.0
    # Over train.steps, or the steps train.minutes holds (attnlab.training.optim): cosine:
    # warm-up over optim.warmup_steps, then a cosine decay; linear: the same warm-up, then a
    # linear decay to zero; onecycle: torch's OneCycleLR, rising from 1/25 of optim.lr over
    # optim.warmup_steps steps, then down, with AdamW's beta1 cycled 0.95-0.85-0.95.
    schedule: str = "cosine"
    # An exponential moving average of the weights, read at validation and saved as the
    # run's weights (attnlab.training.average): its decay, e.g. 0.999; 0 = off.
    ema: float = 0.0

    @classmethod
    def check(cls, o: Any) -> None:
        require(finite(o.lr) and o.lr > 0, "optim.lr", o.lr, "must be a finite number > 0")
        ok = finite(o.weight_decay) and o.weight_decay >= 0
        require(ok, "optim.weight_decay", o.weight_decay, "must be finite and >= 0")
        require(o.warmup_steps >= 0, "optim.warmup_steps", o.warmup_steps, "must be >= 0")
        ok = finite(o.min_lr_ratio) and 0 <= o.min_lr_ratio <= 1
        require(ok, "optim.min_lr_ratio", o.min_lr_ratio, "must be in [0, 1]")
        ok = finite(o.grad_clip) and o.grad_clip > 0
        require(ok, "optim.grad_clip", o.grad_clip, "must be a finite number > 0")
        ok = o.schedule in SCHEDULES
        require(ok, "optim.schedule", o.schedule, f"must be one of {', '.join(SCHEDULES)}")
        ok = finite(o.ema) and 0 <= o.ema < 1
        require(ok, "optim.ema", o.ema, "must be in [0, 1) (0 = off; e.g. 0.999)")


SCHEDULES = ("cosine", "linear", "onecycle")


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
    # adaptive: at most train.threads, fewer while other processes keep CPUs busy (measured
    # every 2 s: attnlab.threads); fixed: exactly train.threads
    thread_policy: str = "adaptive"
    compile: bool = False
    # bf16 autocast: null = on CUDA only (CPU runs stay float32); true = on any device, CPU
    # included (train.bf16=true train.device=cpu); false = never.
    bf16: bool | None = None
    progress: str = "auto"  # auto | rich | plain
    # What the task returns to a Hydra sweeper (Optuna, Nevergrad, Ax): one of OBJECTIVES,
    # e.g. val_exact (maximize). None: the task returns its metrics as a dict, as always.
    objective: str | None = None
    # Parts of the reader kept as they are (no gradient, no optimiser state), by the names
    # its class declares (Reader.PARTS), e.g. [encoder]; checked by attnlab.training.freeze.
    freeze: list[str] = field(default_factory=list)
    # Train until it stops improving: end the run after this many validations without a
    # better train.objective (val_exact when unset; val_cer for a CER objective). best.pt is
    # kept and train.steps stays the ceiling. null or 0: off (every run trains train.steps).
    patience: int | None = None
    # A budget in wall time: training (validations and checkpoints included) ends at this many
    # minutes, over every command that trains the run; the schedule is sized to it. With
    # train.steps and train.patience: whichever ends first (attnlab.training.budget).
    minutes: float | None = None
    # data.unlabelled: self-training's rounds after round 0, at most (attnlab.training.
    # selftrain); a larger value asked again into a run its cap stopped trains on from there.
    rounds: int = 3

    @classmethod
    def check(cls, t: Any) -> None:
        keys = ("steps", "batch_size", "accumulate", "val_every", "log_every", "checkpoint_every")
        check_at_least(t, "train", keys)
        rule = "is too large to allocate; use a smaller batch with train.accumulate=K"
        require(t.batch_size <= 65536, "train.batch_size", t.batch_size, rule)
        require(
            t.examples_shown >= 0 and t.maps_logged >= 0,
            "train.examples_shown/maps_logged",
            (t.examples_shown, t.maps_logged),
            "must be >= 0",
        )
        require(t.threads >= 0, "train.threads", t.threads, "must be >= 0 (0 = default)")
        require(
            t.threads <= MAX_THREADS,
            "train.threads",
            t.threads,
            f"must be <= {MAX_THREADS} (threads per process; 0 = default)",
        )
        ok = t.thread_policy in ("adaptive", "fixed")
        require(ok, "train.thread_policy", t.thread_policy, "must be adaptive or fixed")
        ok = t.progress in ("auto", "rich", "plain")
        require(ok, "train.progress", t.progress, "must be auto, rich or plain")
        check_device(t.device, "train.device")
        ok = t.patience is None or t.patience >= 0
        require(ok, "train.patience", t.patience, "must be >= 1 validations, or 0/null (off)")
        minutes = getattr(t, "minutes", None)
        ok = minutes is None or (finite(minutes) and 0 < minutes <= MAX_MINUTES)
        rule = f"must be a number of minutes > 0 and <= {MAX_MINUTES} (a year), or null (off)"
        require(ok, "train.minutes", minutes, rule)
        rounds = getattr(t, "rounds", 3)
        ok = isinstance(rounds, int) and 0 <= rounds <= MAX_ROUNDS
        rule = f"must be a whole number of self-training rounds in [0, {MAX_ROUNDS}]"
        require(ok, "train.rounds", rounds, rule)
        if t.objective is not None:
            require(
                t.objective in OBJECTIVES,
                "train.objective",
                t.objective,
                f"must be one of {', '.join(OBJECTIVES)} (or null: return the metrics)",
            )


# train.threads' ceiling: far above any one machine's cores, below what segfaults torch's
# thread pool (4096) or exhausts memory (100000); fixed, so a config checked on a login node
# is checked alike on the node that runs it.
MAX_THREADS = 1024

# train.rounds' ceiling: each round reads every unlabelled strip and trains train.steps, so
# a larger number is a typo rather than a plan.
MAX_ROUNDS = 100

# train.minutes' ceiling: a year of wall time (a larger value is a typo, e.g. seconds).
MAX_MINUTES = 525_600

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


def patience_measure(objective: str | None) -> str:
    """What ``train.patience`` watches: the validation measure of ``train.objective``'s kind
    (val_cer for a CER objective; val_exact otherwise, and when it is unset)."""
    return "val_cer" if objective is not None and objective.endswith("_cer") else "val_exact"


def check_objective_of(task: str, objective: str | None) -> None:
    """``attnlab train`` (task "train") measures only the validation objectives; the jobs of
    ``attnlab sweep lengths`` evaluate, so they measure them all."""
    if task == "train" and objective is not None and OBJECTIVES[objective][1] == "evaluation":
        raise UserError(
            f"train.objective={objective} is measured by an evaluation: use it with 'attnlab "
            "sweep lengths' (whose jobs evaluate), or val_exact / val_cer with attnlab train"
        )


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
    # The summary figures (reliability.png, stops.png, attention_summary.png, pace.png):
    # false draws none of them (tables, readings and maps as asked are written all the same;
    # each figure is about 0.2 s, more than a tiny run's evaluation).
    figures: bool = True
    map_lengths: list[int] | None = None  # None = a few seen and unseen lengths
    head_maps: int = 1  # per map length: correct readings and failures drawn head by head
    n_boot: int = 1000
    oracle_length: bool = False  # also read with EOS forced at exactly the true length
    ece_bins: int = 10  # equal-mass bins of the calibration error and reliability diagram
    thresholds: list[float] = field(default_factory=lambda: [0.5, 0.9, 0.99])
    failures_shown: int = 10  # most confident failures printed
    # explore.json (the report's explorer): the first explore_n strips of each length, with
    # image, spans, reading, per-step confidences and attention rows; 0 = none written.
    # 32: a default sweep's page (6 runs x 16 lengths) gains about 2.3 MB (scripts/README.md).
    explore_n: int = 32

    @classmethod
    def check(cls, e: Any, prefix: str = "eval") -> None:
        require(e.n >= 1, f"{prefix}.n", e.n, "must be >= 1 strips per length")
        require(e.batch_size >= 1, f"{prefix}.batch_size", e.batch_size, "must be >= 1")
        check_beam(e.beam, f"{prefix}.beam")
        require(e.maps_k >= 0, f"{prefix}.maps_k", e.maps_k, "must be >= 0")
        require(e.head_maps >= 0, f"{prefix}.head_maps", e.head_maps, "must be >= 0")
        require(e.n_boot >= 0, f"{prefix}.n_boot", e.n_boot, "must be >= 0")
        require(e.ece_bins >= 1, f"{prefix}.ece_bins", e.ece_bins, "must be >= 1")
        require(e.explore_n >= 0, f"{prefix}.explore_n", e.explore_n, "must be >= 0 (0 = none)")
        require(
            all(finite(t) and 0 <= t <= 1 for t in e.thresholds),
            f"{prefix}.thresholds",
            list(e.thresholds),
            "must be confidences in [0, 1]",
        )
        if e.lengths is not None:
            lo, hi = span(e.lengths, f"{prefix}.lengths")
            require(
                hi <= MAX_EVAL_LENGTH,
                f"{prefix}.lengths",
                [lo, hi],
                f"must stay within {MAX_EVAL_LENGTH} digits (each length is a set of eval.n "
                f"strips read step by step)",
            )


@dataclass
class ExperimentConfig:
    """The config of ``attnlab train`` and of every sweep job."""

    seed: int = 0
    # A run directory (its best.pt) or checkpoint to start from: what fits is loaded, the
    # rest (another charset's output layer) re-initialised and listed (attnlab.training.finetune).
    init_from: str | None = None
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = MISSING  # the config group `model` chooses a reader's subclass
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    @classmethod
    def check(cls, cfg: Any) -> None:
        """Every value check of a training config, each section by its own dataclass and the
        model by its reader's (the schema the config group ``model`` composed)."""
        check_seed(cfg.seed)
        DataConfig.check(cfg.data)
        model_schema(cfg.model).check(cfg.model, cfg.data.height)
        check_user_encoder_keys(cfg)  # a key another encoder reads, set on the command line
        OptimConfig.check(cfg.optim)
        TrainConfig.check(cfg.train)
        check_rounds_need_unlabelled(cfg)
        EvalConfig.check(cfg.eval)


def check_rounds_need_unlabelled(cfg: Any) -> None:
    """train.rounds other than its default counts self-training's rounds: without
    data.unlabelled it would change nothing, so it is refused rather than ignored."""
    rounds = getattr(cfg.train, "rounds", TrainConfig.rounds)
    ok = rounds == TrainConfig.rounds or getattr(cfg.data, "unlabelled", None) is not None
    rule = "counts self-training's rounds: needs data.unlabelled=DIR (strips nobody labelled)"
    require(ok, "train.rounds", rounds, rule)


def model_schema(node: Any) -> type[ModelConfig]:
    """The config class of a composed ``model`` node: its reader's, or the shared one."""
    kind = OmegaConf.get_type(node) if isinstance(node, DictConfig) else type(node)
    return kind if isinstance(kind, type) and issubclass(kind, ModelConfig) else ModelConfig


def check_experiment(cfg: Any) -> None:
    """Every value check of a training config; one UserError naming the key."""
    ExperimentConfig.check(cfg)


def plain_config(cfg: Any) -> dict[str, Any]:
    """The config as plain Python values (enums as strings), for checkpoints and JSON."""
    return OmegaConf.to_container(  # type: ignore[return-value]
        OmegaConf.structured(cfg) if not isinstance(cfg, DictConfig) else cfg,
        resolve=True,
        enum_to_str=True,
    )


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
