"""The Hydra task behind ``attnlab train``: build a reader, train it, validate, checkpoint, log.

Everything a run leaves is in its run directory (Hydra's output dir; no chdir): the composed
config (``.hydra/``), ``checkpoints/last.pt`` and ``best.pt``, TensorBoard events (``tb/``),
``train.log``, ``history.csv``, ``status.json`` and, when finished, ``metrics.json``.
A run restarted on the same directory (a cluster requeue) continues from ``last.pt``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnlab import checkpoint
from attnlab.config import (
    OBJECTIVES,
    ExperimentConfig,
    check_experiment,
    lengths_label,
    seen_lengths,
)
from attnlab.data.strips import StripSynth, TrainStream, fixed_set, set_seed
from attnlab.errors import UserError, reports_user_errors
from attnlab.inference import read_strips
from attnlab.io import remove_orphans, write_text
from attnlab.metrics import quick_scores
from attnlab.models import registry
from attnlab.models.base import count_parameters
from attnlab.progress import Progress, use_rich
from attnlab.rundir import RunDir, RunStatus, TrainMetrics
from attnlab.runtime import resolve_device, set_threads, sigterm_as_interrupt

registry.discover()  # reader configs are in the ConfigStore before Hydra composes

log = logging.getLogger("attnlab.train")


class NonFiniteLoss(UserError):
    pass


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="train")
@reports_user_errors
def main(cfg: DictConfig) -> dict[str, Any] | float:
    """``attnlab train``: one run in Hydra's output directory; with ``train.objective``, the
    objective's value (a float, what Hydra's sweepers want) instead of the metrics."""
    objective = cfg.train.get("objective")
    if objective is not None and OBJECTIVES.get(objective, ("", ""))[1] == "evaluation":
        raise UserError(
            f"train.objective={objective} is measured by an evaluation: use it with 'attnlab "
            "sweep lengths' (whose jobs evaluate), or val_exact / val_cer with attnlab train"
        )
    metrics = train(cfg, hydra_run_dir())
    if objective is None:
        return metrics
    return record_objective(hydra_run_dir(), objective, validation_objective(objective, metrics))


def validation_objective(name: str, metrics: dict[str, Any]) -> float:
    """val_exact / val_cer of the best checkpoint (the one evaluations read)."""
    return float(metrics["best"]["exact_acc" if name == "val_exact" else "cer"])


def record_objective(run_dir: Path, name: str, value: float) -> float:
    """Write objective.json into the run, so the value a sweeper got can be checked."""
    RunDir(run_dir).write_objective(name, value, OBJECTIVES[name][0])
    log.info("objective %s = %.6f (%s)", name, value, OBJECTIVES[name][0])
    return value


def hydra_run_dir() -> Path:
    return Path(HydraConfig.get().runtime.output_dir)


def plain_config(cfg: DictConfig | ExperimentConfig) -> dict[str, Any]:
    """The config as plain Python values (enums as strings), for checkpoints and JSON."""
    return OmegaConf.to_container(  # type: ignore[return-value]
        OmegaConf.structured(cfg) if not isinstance(cfg, DictConfig) else cfg,
        resolve=True,
        enum_to_str=True,
    )


@dataclass
class Best:
    step: int = -1
    exact_acc: float = -1.0
    metrics: dict[str, Any] = field(default_factory=dict)


def lr_factor(step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warm-up, then cosine decay to ``floor`` of the peak learning rate."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


class Trainer:
    """One training run; ``run()`` returns the final metrics.

    Building it writes nothing: the config is checked and an existing run's checkpoint is
    loaded first (``prepare``), so a refused command leaves the run directory as it was.
    """

    def __init__(self, cfg: DictConfig, run: RunDir):
        self.cfg = cfg
        self.run_dir = run
        t = cfg.train
        check_experiment(cfg)
        set_threads(t.threads)
        self.device = resolve_device(t.device)
        self.seen = seen_lengths(cfg.data)
        self.synth = StripSynth(cfg.data)
        torch.manual_seed(cfg.seed)
        self.model = registry.build(cfg.model, cfg.data.height, cfg.data.charset)
        self.model = self.model.to(self.device)
        self.params = count_parameters(self.model)
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay
        )
        o = cfg.optim
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: lr_factor(s, o.warmup_steps, t.steps, o.min_lr_ratio)
        )
        self.split: dict[str, Any] | None = None  # data=folder: what the run holds out
        self.started_from: dict[str, Any] | None = None  # init_from: the source checkpoint
        if cfg.data.source == "folder":  # labelled strips: attnlab.data.source_train
            from attnlab.data.source_train import folder_data

            got = folder_data(
                cfg, self.model, self.seen, set_seed(cfg.seed, "train", 0), self.synth
            )
            self.stream, self.val_sets, self.split = got.stream, got.val_sets, got.record
        else:
            self.stream = TrainStream(
                self.synth,
                self.seen,
                t.batch_size,
                set_seed(cfg.seed, "train", 0),
                by_length=cfg.data.batch_by_length,
            )
            self.val_sets = {
                n: fixed_set(self.synth, "val", n, cfg.data.val_per_length) for n in self.seen
            }
        self.step = 0
        self.best = Best()
        self.history: list[dict[str, Any]] = []
        self.last_val: dict[str, Any] = {}
        self.train_seconds = 0.0  # time spent in training steps, over every restart
        self.trained_steps = 0  # steps whose time train_seconds counts
        self.autocast = self.device.type == "cuda" and bool(t.bf16)
        self.loss_fn = torch.compile(self.model.loss) if t.compile else self.model.loss
        self.writer = None
        self.hydra_files = run.hydra_files()
        self.resumed = self.resume()  # may refuse: another reader's or data's checkpoint
        if cfg.get("init_from") and not self.resumed:  # fine-tuning (attnlab.finetune)
            from attnlab.finetune import init_from

            self.started_from = init_from(self.model, cfg, str(cfg.init_from))

    # -- checkpoints ---------------------------------------------------------------------------

    def payload(self) -> dict[str, Any]:
        return {
            "reader": self.model.name,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "step": self.step,
            "rng": {"torch": torch.get_rng_state(), "stream": self.stream.state()},
            "config": plain_config(self.cfg),
            "hydra_files": self.hydra_files,
            "history": self.history,
            "best": {"step": self.best.step, "exact_acc": self.best.exact_acc},
            "best_metrics": self.best.metrics,
            "val": self.last_val,
            "params": self.params,
            "timing": {"train_seconds": self.train_seconds, "steps": self.trained_steps},
            **({"data_split": self.split} if self.split is not None else {}),
            **({"init_from": self.started_from} if self.started_from is not None else {}),
        }

    def resume(self) -> bool:
        """Load last.pt when there is one; refuse a checkpoint of another model or data."""
        last = self.run_dir.checkpoint("last")
        if not last.exists():
            return False
        ckpt = checkpoint.load(last)
        saved, now = ckpt.get("config", {}), plain_config(self.cfg)
        for section in ("model", "data"):
            if saved.get(section) != now[section]:
                raise UserError(
                    f"{last}: this run directory holds a checkpoint trained with another "
                    f"{section} config; use a new run directory (or the same config to resume)"
                )
        checkpoint.load_weights(self.model, ckpt, last)
        self.opt.load_state_dict(ckpt["optimizer"])
        self.sched.load_state_dict(ckpt["scheduler"])
        self.step = int(ckpt["step"])
        torch.set_rng_state(ckpt["rng"]["torch"])
        self.stream.load_state(ckpt["rng"]["stream"])
        self.history = list(ckpt.get("history", []))
        self.best = Best(
            int(ckpt["best"]["step"]),
            float(ckpt["best"]["exact_acc"]),
            ckpt.get("best_metrics", {}),
        )
        self.last_val = ckpt.get("val", {})
        self.started_from = ckpt.get("init_from")
        timing = ckpt.get("timing") or {}
        self.train_seconds = float(timing.get("train_seconds", 0.0))
        self.trained_steps = int(timing.get("steps", 0))
        log.info("resumed from %s at step %d", last, self.step)
        return True

    def save(self, name: str) -> None:
        checkpoint.save(self.run_dir.checkpoint(name), self.payload())

    def record(self, **values: float) -> None:
        """Add values to the history row of the current step."""
        if not self.history or self.history[-1]["step"] != self.step:
            self.history.append({"step": self.step})
        self.history[-1].update(values)

    # -- steps ---------------------------------------------------------------------------------

    def train_step(self) -> float:
        try:
            return self._train_step()
        except (MemoryError, torch.OutOfMemoryError) as err:
            raise UserError(_no_memory(self.cfg.train)) from err
        except RuntimeError as err:
            if "allocate" not in str(err):
                raise
            raise UserError(_no_memory(self.cfg.train)) from err

    def _train_step(self) -> float:
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        acc = self.cfg.train.accumulate
        total = 0.0
        for _ in range(acc):
            batch = self.stream.next()
            images = batch.images.to(self.device, non_blocking=True)
            widths = batch.widths.to(self.device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
                loss = self.loss_fn(images, widths, batch.labels)
            (loss / acc).backward()
            total += float(loss.detach()) / acc
        if not math.isfinite(total):
            last = self.run_dir.checkpoint("last")
            kept = f"the last good checkpoint is {last}" if last.exists() else "no checkpoint yet"
            raise NonFiniteLoss(
                f"non-finite loss ({total}) at step {self.step + 1}: training stopped, {kept} "
                f"(try a lower optim.lr)"
            )
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.optim.grad_clip)
        self.opt.step()
        self.sched.step()
        return total

    def validate(self) -> dict[str, Any]:
        by_length = {}
        shown = []
        for n, strips in self.val_sets.items():
            r = read_strips(self.model, strips, self.device, 512, keep_weights=False)
            exact, cer = quick_scores(strips.labels, r.texts)
            by_length[str(n)] = {"exact_acc": exact, "cer": cer}
            if n == max(self.val_sets):
                shown = [
                    (strips.labels[i], r.texts[i], float(r.confidence[i]))
                    for i in range(min(self.cfg.train.examples_shown, len(strips)))
                ]
        exact = sum(v["exact_acc"] for v in by_length.values()) / len(by_length)
        cer = sum(v["cer"] for v in by_length.values()) / len(by_length)
        val = {"exact_acc": exact, "cer": cer, "by_length": by_length}
        worst = min(by_length.items(), key=lambda kv: kv[1]["exact_acc"])
        log.info(
            "step %d validation: exact %.2f%%  CER %.2f%%  (worst: length %s at %.1f%%)",
            self.step, 100 * exact, 100 * cer, worst[0], 100 * worst[1]["exact_acc"],
        )  # fmt: skip
        log.info("  truth | reading | confidence")
        for truth, reading, conf in shown:
            mark = "" if truth == reading else "   <- wrong"
            log.info("  %s | %s | %.3f%s", truth, reading or "(empty)", conf, mark)
        if self.writer is not None:
            self.writer.add_scalar("val/exact_acc", exact, self.step)
            self.writer.add_scalar("val/cer", cer, self.step)
            for n, v in by_length.items():
                self.writer.add_scalar(f"val_exact_acc/len{int(n):02d}", v["exact_acc"], self.step)
                self.writer.add_scalar(f"val_cer/len{int(n):02d}", v["cer"], self.step)
            self.log_attention_images()
        return val

    def log_attention_images(self) -> None:
        """Weights of a few validation strips as TensorBoard images, when the reader has them."""
        if not self.cfg.train.maps_logged:
            return
        top = self.val_sets[max(self.val_sets)]
        strips = top.select(range(min(self.cfg.train.maps_logged, len(top))))
        r = read_strips(self.model, strips, self.device, 64)
        for i, w in enumerate(r.weights or []):
            img = torch.from_numpy(w).float()
            img = img / img.amax().clamp(min=1e-6)
            img = img.repeat_interleave(8, 0).repeat_interleave(4, 1)[None]  # (1, S*8, T*4)
            self.writer.add_image(f"attention/{i}_{strips.labels[i]}", img, self.step)

    def checkpoint_now(self, started: float) -> None:
        self.train_seconds += time.time() - started
        self.save("last")
        self.run_dir.write_history(self.history)
        self.run_dir.write_status(RunStatus.running, self.step)

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        from torch.utils.tensorboard import SummaryWriter

        t = self.cfg.train
        resumed = self.resumed
        remove_orphans(self.run_dir.checkpoints)
        self.run_dir.write_status(RunStatus.running, self.step)
        if self.split is not None:  # the held-out strips' ids, before any step trains
            self.run_dir.write_split(self.split)
        self.writer = SummaryWriter(str(self.run_dir.tb), purge_step=self.step or None)
        log.info(
            "%s reader: %d parameters; seen lengths %s; %s; %d steps of %d strips%s",
            self.model.name, self.params, lengths_label(self.seen), self.device, t.steps,
            t.batch_size * t.accumulate, f" (resumed at step {self.step})" if resumed else "",
        )  # fmt: skip
        if resumed and self.step >= t.steps:
            log.warning(
                "train.steps=%d is not above the %d steps this run has done: nothing to train; "
                "it ends at step %d (a larger train.steps trains on)", t.steps, self.step,
                self.step,
            )  # fmt: skip
        if self.step == 0:
            self.last_val = self.validate()
            self.record(val_exact_acc=self.last_val["exact_acc"], val_cer=self.last_val["cer"])
        start_time, start_step = time.time(), self.step
        lap = start_time
        progress = Progress(t.steps, self.step, use_rich(t.progress))
        try:
            while self.step < t.steps:
                loss = self.train_step()
                self.step += 1
                self.trained_steps += 1
                lr = self.sched.get_last_lr()[0]
                progress.update(self.step, loss, self.last_val.get("exact_acc"))
                if self.step % t.log_every == 0 or self.step == t.steps:
                    self.writer.add_scalar("train/loss", loss, self.step)
                    self.writer.add_scalar("train/lr", lr, self.step)
                    self.record(loss=loss, lr=lr)
                    if not progress.rich:
                        rate = (
                            (self.step - start_step)
                            * t.batch_size
                            * t.accumulate
                            / max(1e-9, time.time() - start_time)
                        )
                        log.info(
                            "step %d/%d  loss %.4f  lr %.2e  %.0f strips/s",
                            self.step, t.steps, loss, lr, rate,
                        )  # fmt: skip
                if self.step % t.val_every == 0 or self.step == t.steps:
                    self.last_val = self.validate()
                    self.record(
                        val_exact_acc=self.last_val["exact_acc"], val_cer=self.last_val["cer"]
                    )
                    if self.last_val["exact_acc"] > self.best.exact_acc:
                        self.best = Best(self.step, self.last_val["exact_acc"], self.last_val)
                        self.save("best")
                if self.step % t.checkpoint_every == 0 or self.step == t.steps:
                    self.checkpoint_now(lap)
                    lap = time.time()
        finally:
            progress.close()
            self.writer.flush()
        metrics = TrainMetrics(
            reader=self.model.name,
            step=self.step,
            params=self.params,
            elapsed_s=round(self.train_seconds, 2),
            strips_per_s=round(
                self.trained_steps * t.batch_size * t.accumulate / max(self.train_seconds, 1e-9),
                1,
            ),
            seen_lengths=self.seen,
            val=self.last_val,
            best={
                "step": self.best.step,
                "exact_acc": self.best.exact_acc,
                "cer": self.best.metrics.get("cer"),
            },
        )
        self.run_dir.write_metrics(metrics)
        self.run_dir.write_history(self.history)
        self.writer.close()
        log.info(
            "done: step %d, validation exact %.2f%% CER %.2f%%, best exact %.2f%% at step %d; %s",
            self.step, 100 * self.last_val["exact_acc"], 100 * self.last_val["cer"],
            100 * self.best.exact_acc, self.best.step, self.run_dir.path,
        )  # fmt: skip
        return metrics.__dict__


def _no_memory(t: Any) -> str:
    return (
        f"train.batch_size={t.batch_size}: cannot allocate a batch that large on this machine; "
        f"use a smaller train.batch_size with train.accumulate=K (K micro-batches per step)"
    )


def train(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Train in ``run_dir`` (resuming from its last.pt if there is one); status.json says how
    it went, whatever happens. The run directory is locked while this runs; a command that
    is refused (bad config, another reader's checkpoint, a locked directory) changes nothing
    in it: its ``.hydra/`` is written here, once the command is accepted (Hydra's own
    writing is off: ``hydra.output_subdir: null`` in conf/train.yaml), and a bad value is
    refused before the lock, the status or anything else is written."""
    run = RunDir(run_dir)
    try:
        check_experiment(cfg)  # value checks first: a refusal here writes nothing
    except Exception as err:
        fresh = not run.status_file.exists()
        if _is_multirun() or not fresh:  # a fresh single run: the CLI says why, on stderr
            log.error("refused: %s", one_line(err))
        if _is_multirun() and fresh:  # the sweep summary lists it
            write_hydra_files(run, cfg)
            _record(run, RunStatus.failed, 0, f"{type(err).__name__}: {one_line(err)}")
        raise
    lock = run.lock("train")
    was_there = {lock.path, *_job_logs(run)}
    was_there = {f for f in was_there if f.exists()}
    with lock:
        fresh = not run.status_file.exists()
        try:
            trainer = Trainer(cfg, run)  # refusals happen here, before anything is written
        except BaseException as err:
            if fresh and not _is_multirun():  # the CLI says why on stderr; no trace here
                _leave_nothing(run, lock.path, was_there)
                raise
            log.error("refused: %s", one_line(err))
            if fresh:  # a sweep job that never started: the sweep summary lists it
                write_hydra_files(run, cfg)
                _record(run, RunStatus.failed, 0, f"{type(err).__name__}: {one_line(err)}")
            raise
        write_hydra_files(run, cfg)  # accepted: this command's config is the run's
        trainer.hydra_files = run.hydra_files()
        with sigterm_as_interrupt():
            try:
                metrics = trainer.run()
            except BaseException as err:
                # Ctrl-C, SIGTERM, or submitit ending the process to requeue it (SystemExit)
                if isinstance(err, (KeyboardInterrupt, SystemExit)):
                    state, reason = RunStatus.interrupted, f"interrupted ({type(err).__name__})"
                else:
                    state, reason = RunStatus.failed, f"{type(err).__name__}: {err}"
                log.error("%s at step %d: %s", state.value, trainer.step, reason)
                _record(run, state, trainer.step, reason)
                raise
        run.write_status(RunStatus.complete, metrics["step"])
    return metrics


def _job_logs(run: RunDir) -> list[Path]:
    """The files of the logging handlers that write into the run (Hydra's job log)."""
    names = [getattr(h, "baseFilename", None) for h in logging.getLogger().handlers]
    return [Path(n) for n in names if n and Path(n).parent == run.path.resolve()]


def _leave_nothing(run: RunDir, lock_file: Path, was_there: set[Path]) -> None:
    """A fresh run refused (not a sweep job): remove what this command made in it, the lock
    file and the job log a record before the refusal opened (Hydra's file handler is lazy,
    conf/hydra/job_logging/delayed.yaml: the log exists only once something is logged, e.g.
    a warning about an image), so that the run directory is left as it was."""
    for handler in logging.getLogger().handlers:
        name = getattr(handler, "baseFilename", None)
        if name and Path(name) in set(_job_logs(run)) - was_there and Path(name).exists():
            handler.close()
            Path(name).unlink()
    if lock_file not in was_there:
        lock_file.unlink(missing_ok=True)  # still held: a racing command takes a new one


def one_line(err: BaseException) -> str:
    """An error as one line (OmegaConf's messages go on with ``full_key:`` lines)."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    key = next((ln.split(":", 1)[1].strip() for ln in lines if "full_key:" in ln), "")
    return lines[0] + (f" (key: {key})" if key else "")


def _is_multirun() -> bool:
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def write_hydra_files(run: RunDir, cfg: DictConfig) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, as Hydra writes them
    (unresolved), each whole or not at all; only the config outside a Hydra app."""
    write_text(run.config, OmegaConf.to_yaml(cfg))
    if HydraConfig.initialized():
        hydra_cfg = HydraConfig.instance().cfg  # {"hydra": ...}
        write_text(run.config.parent / "hydra.yaml", OmegaConf.to_yaml(hydra_cfg))
        write_text(run.overrides, OmegaConf.to_yaml(hydra_cfg.hydra.overrides.task))


def _record(run: RunDir, state: RunStatus, step: int, reason: str) -> None:
    """Write the final status if the disk lets us; the error being raised says the rest."""
    try:
        run.write_status(state, step, reason)
    except UserError as err:
        log.error("could not record the status: %s", err)
