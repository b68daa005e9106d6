"""Every job of a grid sweep checked before the first one starts (``attnlab sweep lengths``,
``attnlab train -m``).

A job's config is checked when the job starts, so a bad one (``data.limit`` over its pool, a
``train.freeze`` part one reader lacks, another sweep's job already in the folder, the same
values in another order) was found only once the jobs before it had trained, and it left a
run folder marked failed. ``conf/train.yaml`` registers ``JobCheck`` as a Hydra callback:
in the sweep's own process, before the sweeper writes ``multirun.yaml`` or any job starts,
it composes each job's config as the basic sweeper will and runs on it the checks the job
itself runs before its first step:

- the config's values (``attnlab.training.prepare.check_training``);
- its run directory: not in use by a live process;
- a job that reads labelled strips or starts from ``init_from``, and a job whose directory
  holds a run already (a sweep run again, or another sweep in the same folder): its trainer
  is built, as the job builds it, which refuses what the job would (``data.limit`` over the
  pool, a run that this config would not resume: other values, or the jobs in another
  order). Building one writes nothing; fresh jobs that differ only in ``seed`` share one,
  and a folder is decoded once for all of them and the jobs the sweep runs in its own
  process (``data.strip_cache``).

The first refusal ends the sweep in one line (which job, its directory, why) and exit status
2, with nothing written. An optimising sweeper (Optuna, Nevergrad, Ax) draws its trials as it
goes, so only the grid sweeper's jobs can be checked up front.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from attnlab.config.model import check_encoder_keys, keys_set_by
from attnlab.config.overrides import override_key
from attnlab.errors import UserError, exit_with

QUIET = ("attnlab", "attnlab.train", "attnlab.threads")  # the jobs say it again, when they run


class JobsRefused(UserError):
    """A sweep refused before its first job: nothing ran, so nothing is summarised."""


class JobCheck(Callback):
    """Checks every job of a grid sweep before the first one starts."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_jobs(config)
        except UserError as err:
            exit_with(err if isinstance(err, JobsRefused) else JobsRefused(str(err)))


def check_jobs(config: DictConfig) -> None:
    """Each job's config, in the sweeper's order; the first refusal as a JobsRefused."""
    from hydra.core.global_hydra import GlobalHydra

    try:
        jobs = job_overrides(config)
    except Exception:  # overrides Hydra cannot parse: its own line says so, as before
        return
    if jobs is None:
        return
    loader = GlobalHydra.instance().config_loader()
    checked: dict[str, str] = {}
    levels = {name: logging.getLogger(name).level for name in QUIET}
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        for num, overrides in enumerate(jobs):
            try:
                job = loader.load_sweep_config(config, _as_the_task_adds(config, overrides))
            except Exception:  # an override Hydra cannot compose: its own check says so,
                return  # in one line, before any job starts (validate_batch_is_legal)
            with read_write(job), open_dict(job):
                job.hydra.job.num = num
                job.hydra.job.id = f"check_{num}"
            folder = _job_dir(job)
            task = copy.deepcopy(job)
            with read_write(task), open_dict(task):
                del task["hydra"]
            try:
                check_encoder_keys(task.model, keys_set_by(overrides))  # the job's own words
                check_job(task, folder, checked)
            except UserError as err:
                where = f" ({folder})" if folder is not None else ""
                raise JobsRefused(
                    f"sweep job {num} [{' '.join(overrides)}]{where}, checked before any job "
                    f"started: {err}{_order_hint(folder, overrides, jobs)}"
                ) from err
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _as_the_task_adds(config: DictConfig, overrides: list[str]) -> list[str]:
    """A job's overrides with what ``attnlab train``'s first step adds to them (the
    recipe, init_from's reader: attnlab.tasks.recipe), so the config checked is the one
    that trains."""
    if OmegaConf.select(config, "hydra.job.config_name") != "train":
        return list(overrides)
    from attnlab.tasks.recipe import resolve

    resolved = resolve(overrides)
    return [*overrides, *(resolved.keys if resolved else [])]


def job_overrides(config: DictConfig) -> list[list[str]] | None:
    """Every job's overrides as the basic sweeper makes them (its params, then the command
    line's), or None for a sweeper that draws its trials as it goes."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    target = str(OmegaConf.select(config, "hydra.sweeper._target_", default="") or "")
    if not target.endswith("BasicSweeper"):
        return None
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    args = [f"{k}={v}" for k, v in params.items()]
    args += list(OmegaConf.to_container(config.hydra.overrides.task, resolve=False))
    parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
    batches = BasicSweeper.split_arguments(parser.parse_overrides(args), None)
    return [list(job) for batch in batches for job in batch]


def _job_dir(job: DictConfig) -> Path | None:
    """The job's run directory (``hydra.sweep.dir``/``subdir``); None if it cannot be said
    before the job runs."""
    try:
        return Path(str(job.hydra.sweep.dir)) / str(job.hydra.sweep.subdir)
    except Exception:  # an interpolation only the running job can resolve
        return None


def check_job(cfg: DictConfig, folder: Path | None, checked: dict[str, str]) -> None:
    """One job: what it checks before its first step. ``checked``: fresh jobs already
    checked by building their trainer, by their config without ``seed``."""
    from attnlab.runs.rundir import RunDir
    from attnlab.training.prepare import check_training

    check_training(cfg)
    run = RunDir(folder) if folder is not None else None
    if run is not None and (holder := run.lock_holder()) is not None:
        raise UserError(f"{folder}: run directory is in use ({holder})")
    there = run is not None and run.checkpoint("last").is_file()
    reads = OmegaConf.select(cfg, "data.source") == "folder" or OmegaConf.select(cfg, "init_from")
    if not there and not reads:
        return
    key = OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "seed"]))
    if not there and key in checked:
        return
    _build_trainer(cfg, run if run is not None else RunDir(Path(".attnlab-no-run")))
    checked[key] = "ok"


def _build_trainer(cfg: DictConfig, run: Any) -> None:
    """The job's trainer, built as the job builds it (it writes nothing) and dropped; on the
    CPU (``train.device`` cannot change what a run computes), since the sweep's own process
    may run where its jobs' GPUs are not (a cluster's login node)."""
    from attnlab.threads import FixedThreads
    from attnlab.training.trainer import Trainer

    cfg = copy.deepcopy(cfg)
    with read_write(cfg):
        cfg.train.device = "cpu"
    Trainer(cfg, run, threads=FixedThreads(), checked=True)


def _order_hint(folder: Path | None, overrides: list[str], jobs: list[list[str]]) -> str:
    """A job whose directory holds a run: which job it was, when it was another job of this
    sweep by the values the sweep varies (the values given in another order), else what it
    was run with."""
    if folder is None:
        return ""
    try:
        before = [str(o) for o in OmegaConf.load(folder / ".hydra" / "overrides.yaml")]
    except Exception:  # no record: nothing to say
        return ""
    swept = {k for k in {override_key(o) for job in jobs for o in job} if _varies(k, jobs)}
    mine = [_values(job, swept) for job in jobs]
    was = _values(before, swept)
    if sorted(before) == sorted(overrides):
        return ""
    if swept and was in mine and was != _values(overrides, swept):
        shown = " ".join(f"{k}={v}" for k, v in sorted(was.items()))
        return (
            f"; {folder} holds job {mine.index(was)} of this sweep ({shown}): its values are "
            "in another order than when it ran; give them in that order"
        )
    return f"; {folder} holds a job run with [{' '.join(sorted(before))}]"


def _values(overrides: list[str], keys: set[str]) -> dict[str, str]:
    return {
        override_key(o): o.split("=", 1)[1]
        for o in overrides
        if "=" in o and override_key(o) in keys
    }


def _varies(key: str, jobs: list[list[str]]) -> bool:
    return len({str(_values(job, {key})) for job in jobs}) > 1
