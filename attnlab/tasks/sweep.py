"""The Hydra task behind ``attnlab sweep lengths``: each job trains, then evaluates.

The sweep itself is a Hydra multirun (``conf/sweep.yaml`` sets the axes), so the basic,
submitit_local and submitit_slurm launchers all run it unchanged. By default it runs on
``hydra/launcher=parallel`` (Hydra's joblib launcher): as many jobs at once as this machine's
CPUs and memory allow, the threads divided between them (``runtime.local_jobs``). A job that
fails leaves ``status.json`` saying why; ``summarize`` reads those after the sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from attnlab.config import OBJECTIVES
from attnlab.errors import UserError, reports_user_errors
from attnlab.evaluation.evaluate import evaluate_run
from attnlab.evaluation.metrics import TOTAL
from attnlab.runs.evaldir import EvalDir
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.resume import resume_command, sweep_command
from attnlab.runs.rundir import RunDir, RunStatus
from attnlab.runtime import Interrupted, local_jobs, sigterm_as_interrupt
from attnlab.tasks.train import hydra_run_dir
from attnlab.training.session import record_objective, train, validation_objective

log = logging.getLogger("attnlab.sweep")
# hydra/launcher=parallel (the sweep's default): jobs at once on this machine
OmegaConf.register_new_resolver("attnlab.jobs", local_jobs, replace=True)


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="sweep")
@reports_user_errors
def main(cfg: DictConfig) -> dict[str, Any] | float:
    """One sweep job; with ``train.objective``, the objective's value (a float) for a Hydra
    sweeper instead of the metrics."""
    run_dir = hydra_run_dir()
    result = train_and_evaluate(cfg, run_dir)
    name = cfg.train.get("objective")
    if name is None:
        return result
    if OBJECTIVES[name][1] == "validation":
        return record_objective(run_dir, name, validation_objective(name, result))
    return record_objective(run_dir, name, evaluation_objective(name, Path(result["eval_dir"])))


def evaluation_objective(name: str, eval_dir: Path) -> float:
    """seen_exact, unseen_exact, seen_cer or unseen_cer: a split total of the evaluation."""
    split, metric = name.split("_")
    table = pd.read_csv(EvalDir(eval_dir).table_csv, dtype={"length": str, "split": str})
    row = table[(table["length"] == TOTAL) & (table["split"] == split)]
    if row.empty:
        raise UserError(
            f"train.objective={name}: the evaluation {eval_dir} read no {split} length "
            "(see eval.lengths)"
        )
    return float(row.iloc[0]["exact_acc" if metric == "exact" else "cer"])


def train_and_evaluate(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Train, then evaluate on the run's own test strips; a reader fine-tuned on labelled
    strips (``init_from`` with ``data=folder``) is also read on the synthetic test sets, so
    the report shows what it still reads of what it started from (forgetting)."""
    trained = False
    # A stopped sweep: this job says so, as in training. One handler from the first step to
    # the last evaluation: a SIGTERM just after training wrote "complete" (the run directory
    # still being closed) is an interrupted evaluation too, never a worker killed silently.
    with sigterm_as_interrupt() as stop:
        try:
            metrics = train(cfg, run_dir)
            trained = True
            out = evaluate_run(run_dir, cfg.eval, "best", cfg.train.device, say=log.info)
            if _reads_synthetic_too(cfg):
                evaluate_run(run_dir, cfg.eval, "best", cfg.train.device, log.info, synthetic=True)
        except BaseException as err:
            _record_evaluation_end(RunDir(run_dir), err, trained, stop.received)
            raise
    return {**metrics, "eval_dir": str(out)}


def _reads_synthetic_too(cfg: DictConfig) -> bool:
    """A reader fine-tuned on labelled strips: its job also reads the synthetic test sets."""
    return bool(OmegaConf.select(cfg, "init_from")) and (
        OmegaConf.select(cfg, "data.source") == "folder"
    )


def _record_evaluation_end(run: RunDir, err: BaseException, trained: bool, sigterm: bool) -> None:
    """The status of a job that ended once its training was complete: interrupted (Ctrl-C,
    SIGTERM, a requeue: it resumes) or failed, with the evaluation's error. An error inside
    training was recorded by training itself. ``sigterm``: this job's handler caught a
    SIGTERM after training wrote "complete"; whatever error it surfaced as (a library may
    wrap it: reading a YAML file turned it into an unreadable config), the job was stopped."""
    try:
        status = run.read_status()
    except RunFileError:
        return
    if status.state is not RunStatus.complete or not (trained or sigterm):
        return
    if sigterm and not isinstance(err, Interrupted):
        reason = f"evaluation: Interrupted (SIGTERM, surfacing as {type(err).__name__}: {err})"
    else:
        reason = f"evaluation: {type(err).__name__}: {err}"
    stopped = sigterm or isinstance(err, (KeyboardInterrupt, SystemExit))  # resumes
    run.write_status(RunStatus.interrupted if stopped else RunStatus.failed, status.step, reason)


def summarize(sweep_dir: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The jobs of a sweep directory: those complete, and the others with their reason."""
    done, failed = [], []
    for cfg in sorted(sweep_dir.glob("*/.hydra/config.yaml")):
        run = RunDir(cfg.parent.parent)
        try:
            status = run.read_status()
        except RunFileError as err:
            failed.append((run.path, f"{err} (the job did not start or was killed)"))
            continue
        if status.state is RunStatus.complete:
            missing = _evaluations_missing(run, cfg, status.step)
            if missing is None:
                done.append(run.path)
            else:
                failed.append((run.path, missing))
        elif status.state is RunStatus.running and run.lock_holder() is None:
            failed.append((run.path, f"killed at step {status.step} (no process holds the run)"))
        else:
            reason = status.error or "no error recorded"
            failed.append((run.path, f"{status.state.value}: {reason}"))
    return done, failed


def _evaluations_missing(run: RunDir, config: Path, step: int) -> str | None:
    """A job whose training is complete is done once its evaluations are written after it
    (one; two for a reader fine-tuned on labelled strips): training writes "complete" before
    the job evaluates, so a job killed outright (SIGKILL, a node lost) while it evaluates
    leaves "complete" and no evaluation. None when they are there, else why not."""
    try:
        wanted = 2 if _reads_synthetic_too(OmegaConf.load(config)) else 1
    except Exception:  # an unreadable config: one evaluation is the least a job writes
        wanted = 1
    try:
        trained_at = run.metrics_file.stat().st_mtime
    except OSError:
        return f"complete without {run.metrics_file.name} (the job did not finish its training)"
    written = [e for e in run.evals() if _mtime(e.meta_file) >= trained_at]
    if len(written) >= wanted:
        return None
    if run.lock_holder() is not None:
        return f"running: evaluating (training complete at step {step})"
    return (
        f"killed while evaluating: training complete at step {step}, "
        f"{len(written)} of its {wanted} evaluation(s) written"
    )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


def job_logs(job: Path, sweep_dir: Path) -> list[Path]:
    """The logs of one sweep job: its train.log and, under a submitit launcher, its own
    stdout and stderr files (``.submitit/<job id>/``, the id from ``.hydra/hydra.yaml``)."""
    from omegaconf import OmegaConf

    logs = sorted(job.glob("*.log"))
    try:
        job_id = OmegaConf.load(job / ".hydra" / "hydra.yaml").hydra.job.id
    except Exception:  # no hydra.yaml, or no id: only the run's own logs
        return logs
    folder = sweep_dir / ".submitit" / str(job_id)
    return logs + sorted(p for p in folder.glob("*") if p.suffix in (".out", ".err"))


def report_sweeps(
    args: list[str], started: float, echo: Callable[[str], Any] = print, stopped: bool = False
) -> bool:
    """After ``attnlab sweep lengths ARGS``: each sweep written since ``started``, which of
    its jobs were interrupted (Ctrl-C, SIGTERM: with the command that resumes the sweep) or
    failed, where their logs are, and its variants; True if any job did not complete.
    ``stopped``: the command itself was stopped (Ctrl-C), which the summary says even when no
    job had started yet."""

    if any(a in ("--cfg", "-c", "--help", "--hydra-help", "--info") for a in args):
        return False
    root = next((_value(a) for a in args if a.startswith("hydra.sweep.dir=")), None)
    root = Path(root) if isinstance(root, str) else Path("multirun")
    # Hydra's basic sweeper writes multirun.yaml; the Optuna sweeper its optimization results
    markers = ("multirun.yaml", "optimization_results.yaml")
    sweeps = [
        p.parent
        for marker in markers
        for p in root.glob(f"**/{marker}")
        if p.stat().st_mtime >= started - 1
    ]
    if any(root.joinpath(m).exists() for m in markers) and root not in sweeps:
        sweeps.append(root)
    if stopped and not sweeps:
        echo(f"stopped before the sweep started; run it with: attnlab sweep lengths {_shell(args)}")
    bad = False
    for sweep in sorted(set(sweeps)):
        bad = _report_sweep(sweep, echo, stopped) or bad
    return bad


def _report_sweep(sweep: Path, echo: Callable[[str], Any], stopped: bool) -> bool:
    """One sweep's summary (see ``report_sweeps``); True if any job did not complete."""
    done, failed = summarize(sweep)
    interrupted = [(job, why) for job, why in failed if why.startswith("interrupted")]
    failed = [(job, why) for job, why in failed if not why.startswith("interrupted")]
    stopped_jobs = f" ({len(interrupted)} interrupted)" if interrupted else ""
    echo(
        f"sweep {sweep}: {len(done)} job(s) complete, {len(failed) + len(interrupted)} failed "
        f"or incomplete{stopped_jobs}"
    )
    for job, reason in interrupted:
        echo(f"  interrupted {job}: {reason.removeprefix('interrupted: ')}")
        echo(f"    logs: {', '.join(str(p) for p in job_logs(job, sweep)) or job}")
    for job, reason in failed:
        logs = [str(p) for p in job_logs(job, sweep)]
        echo(f"  FAILED {job}: {reason}{_resume_hint(job, reason)}")
        echo(f"    logs: {', '.join(logs) or job}")
    if (stopped or interrupted) and (command := sweep_command(sweep)):
        echo(f"  resume the sweep with: {command}")
    if done:
        from attnlab.report import discover_runs
        from attnlab.report.variants import summary_lines

        lines = summary_lines(discover_runs([sweep]))
        echo("variants (each its own line in the report):")
        for line in lines:
            echo(line)
        echo(f"next: attnlab report {sweep}")
    return bool(failed or interrupted)


def _resume_hint(job: Path, reason: str) -> str:
    """For a job killed with its last.pt kept: the command that resumes its sweep."""
    if not reason.startswith("killed") or not RunDir(job).checkpoint("last").is_file():
        return ""
    command = resume_command(job)
    return f"; resume the sweep with: {command}" if command else ""


def _shell(args: list[str]) -> str:
    import shlex

    return shlex.join(args)


def _value(override: str) -> object:
    """An override's value as Hydra reads it (quotes removed); None when it cannot be read."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(override).value()
    except Exception:  # Hydra itself has said why
        return None
