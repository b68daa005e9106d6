"""Hydra's joblib launcher, with its worker processes ended when the sweep is stopped.

``hydra/launcher=parallel`` (``conf/hydra/launcher/parallel.yaml``, the default of
``attnlab sweep lengths``) selects it. Launching is the plugin's own (loky worker processes);
the one difference is what SIGTERM or Ctrl-C to the sweep does. ``kill PID`` or a
scheduler's signal to the sweep reaches only its main process: by default that process dies
at once and the workers go on training, orphaned. Ctrl-C in a terminal reaches the whole
process group: by default each worker holds it until its step is whole, but the main process
gets KeyboardInterrupt at once, and joblib kills the workers before they save (a job 450
steps in left no last.pt and ``status.json`` "running"). So while a sweep runs, a job ignores
Ctrl-C itself (``MarksBusy``), and the main process treats SIGINT as it treats SIGTERM: it
passes SIGTERM on to every worker
that runs a job (``MarksBusy``: an idle worker would die of it and break the pool), whose job
records itself as interrupted (``attnlab.runtime.sigterm_as_interrupt``) and
returns that error; the main process waits until no job holds its run directory, then joblib
dispatches no further job, ends its workers and raises it, so the command ends with no
process left behind and no job cut short while it saves. Each run resumes from its ``last.pt``
when the sweep is run again.

With ``pre_dispatch: n_jobs`` and ``batch_size: 1`` (parallel.yaml) no job is queued
behind a running one, and the jobs are handed to joblib one by one until the sweep is stopped
(``UntilStopped``), so no queued job starts once it has been.

A stopped sweep ends the same whenever the signal comes, even while loky's workers are still
starting (a worker killed by Ctrl-C before it runs anything breaks the pool: loky then kills
the busy workers and raises TerminatedWorkerError). Worker processes start with SIGINT
ignored (``ctrl_c_kept_from_workers``), and keep ignoring it (``MarksBusy``): the main
process alone takes the terminal's Ctrl-C, from the launcher's setup on (``StopHeld``).
A job that the stop finds dispatched but not yet running records itself interrupted at
step 0 (``MarksBusy``: it resumes like the others); a stopped job returns to
joblib as a failed job rather than raising, so joblib kills no worker while another job is
still saving; and once every dispatched job has returned, the launch raises
``KeyboardInterrupt`` (``Interrupted`` for SIGTERM): the command ends with exit status 130
and the sweep's summary names each job interrupted, with the command that resumes it.

With GPUs (``attnlab.runtime.gpu_ids``, or ATTNLAB_FAKE_GPUS in tests) each job gets its
GPU through CUDA_VISIBLE_DEVICES, set in its worker before the job runs (before CUDA starts
there): the sweep has ``jobs_per_gpu`` slots per GPU, one lock file each, and a job holds
the first free slot while it runs, so no more than ``jobs_per_gpu`` jobs share a GPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import multiprocessing
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher


class OnGpuSlot:
    """The task function, run with CUDA_VISIBLE_DEVICES set to the GPU of the first free slot
    (``slot-K-gpu-ID.lock`` under ``slots``), held while the job runs."""

    def __init__(self, task_function: Any, slots: str) -> None:
        self.task_function = task_function
        self.slots = slots

    def __call__(self, cfg: Any) -> Any:
        files = sorted(
            Path(self.slots).glob("slot-*.lock"), key=lambda p: int(p.name.split("-")[1])
        )
        for i, path in enumerate(files * 2):  # every slot once without waiting, then wait
            handle = path.open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (fcntl.LOCK_NB if i < len(files) else 0))
            except BlockingIOError:
                handle.close()
                continue
            os.environ["CUDA_VISIBLE_DEVICES"] = path.stem.split("-gpu-")[1]
            try:
                return self.task_function(cfg)
            finally:
                handle.close()  # frees the slot
        return self.task_function(cfg)  # no slots: unreachable with files


GRACE_S = 60.0  # how long a stopped sweep waits for its jobs to say how they ended
STOP = "stop"  # the marker a stopping sweep leaves for jobs that would start now


class SweepStopped(Exception):
    """How a job that its sweep's stop ended returns to joblib: as a failed job (Hydra's
    ``run_job`` keeps an Exception in its JobReturn), not raised on, since joblib kills
    every worker at the first job that raises, and another job may still be saving."""


class MarksBusy:
    """The task function, run with the marker ``busy-<pid>`` under ``folder`` while it runs,
    so that a stopped sweep signals only the workers that run a job: an idle loky worker has
    SIGTERM's default action, and its death breaks the pool, whereupon loky kills the busy
    workers before their jobs say how they ended. A job that would start once the sweep is
    stopping (``STOP`` there) does not start: it records itself interrupted at step 0."""

    def __init__(self, task_function: Any, folder: str) -> None:
        self.task_function = task_function
        self.folder = folder

    def __call__(self, cfg: Any) -> Any:
        from attnlab.runtime import Interrupted, sigterm_as_interrupt

        folder = Path(self.folder)
        mark = folder / f"busy-{os.getpid()}"
        # The terminal's Ctrl-C is the sweep's main process's to pass on (as SIGTERM, once, so
        # that the job stops after a whole step: a second signal would stop it at once); the
        # stop's cause is the marker's text (STOP_CAUSE). Ignored for good: an idle worker
        # that died of it would break the pool.
        _ignore_sigint()
        os.environ[STOP_CAUSE] = str(folder / STOP)
        with sigterm_as_interrupt():  # from the mark on, SIGTERM stops the job, not the worker
            mark.touch()  # then STOP looked for: a stop finds this mark, or the job finds STOP
            try:
                if (folder / STOP).exists():
                    raise Interrupted()
                return self.task_function(cfg)
            except KeyboardInterrupt as err:
                cause = stop_cause(folder)
                if cause is None:  # not the sweep's stop: as it came
                    raise
                _record_not_started(cause, cfg)
                raise SweepStopped(f"interrupted ({cause})") from err
            finally:
                mark.unlink(missing_ok=True)
                os.environ.pop(STOP_CAUSE, None)


def stop_cause(folder: Path) -> str | None:
    """What stopped the sweep ("Ctrl-C", "SIGTERM"), from its STOP marker; None: running."""
    try:
        return Path(folder, STOP).read_text().strip() or "SIGTERM"
    except OSError:
        return None


def _record_not_started(cause: str, cfg: Any) -> None:
    """A job stopped before its training recorded anything (its run directory has no
    status): its config and status interrupted at step 0, so that the summary lists it and
    the sweep's command starts it again."""
    from hydra.core.hydra_config import HydraConfig

    from attnlab.runs.rundir import RunDir, RunStatus
    from attnlab.training.session import write_hydra_files

    try:
        run = RunDir(HydraConfig.get().runtime.output_dir)
    except ValueError:  # no Hydra job here: nothing to record
        return
    if run.path.is_dir() and not run.status_file.exists():
        if not run.config.is_file():
            write_hydra_files(run, cfg)
        run.write_status(RunStatus.interrupted, 0, f"interrupted ({cause}) before it started")


class UntilStopped(Sequence):
    """A sweep's jobs (their overrides), handed out by iteration only until the sweep is
    stopped (the STOP marker under ``folder``): joblib takes the next job from the iterator
    as a worker frees, so no queued job starts once the sweep is stopped."""

    def __init__(self, jobs: Sequence[Sequence[str]], folder: str) -> None:
        self.jobs, self.folder = jobs, folder

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, index: Any) -> Any:
        return self.jobs[index]

    def __iter__(self) -> Iterator[Sequence[str]]:
        for job in self.jobs:
            if (Path(self.folder) / STOP).exists():
                return
            yield job


@contextlib.contextmanager
def ctrl_c_kept_from_workers(folder: str) -> Iterator[None]:
    """While it lasts, the processes loky starts (its workers) start with SIGINT ignored, so
    that none dies of the terminal's Ctrl-C while it starts, or idle: their jobs are stopped
    by the main process (``forward_to_workers``). loky starts each worker as
    ``sys.executable -m ...``; here that is a script under ``folder`` that ignores SIGINT and
    runs the same Python (an ignored signal stays ignored across exec, and Python then
    installs no KeyboardInterrupt handler). A signal mask would not do: the child's is
    reset. Should a worker still die of a Ctrl-C (in the instant before the script ignores
    it), the stopped launch ends as a Ctrl-C all the same (``raise_if_stopped``)."""
    real = sys.executable
    if not real or os.name != "posix":
        yield
        return
    script = Path(folder, "python-without-ctrl-c")
    script.write_text(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(real)} \"$@\"\n")
    script.chmod(0o700)
    sys.executable = str(script)
    try:
        yield
    finally:
        sys.executable = real


def raise_if_stopped(folder: str, err: BaseException | None = None) -> None:
    """Once the launch has returned (or raised ``err``): a stopped sweep ends as Ctrl-C
    (KeyboardInterrupt) or SIGTERM (``Interrupted``) ends a command, whatever joblib made of
    it (a worker lost while it stopped: TerminatedWorkerError)."""
    from attnlab.runtime import Interrupted

    cause = stop_cause(Path(folder))
    if cause is not None:
        raise (KeyboardInterrupt() if cause == "Ctrl-C" else Interrupted()) from err


def _ignore_sigint() -> Any:
    """SIGINT ignored in this (main) thread; the handler it had, or None outside it."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


# The variable that names, in a job, the marker a stopped sweep writes with what stopped it
# ("Ctrl-C" or "SIGTERM"): the job's status says that (attnlab.training.session).
STOP_CAUSE = "ATTNLAB_SWEEP_STOP"


def forward_to_workers(
    signum: int, frame: object, busy: str | None = None, sweep_dir: str | None = None
) -> None:
    """SIGTERM or SIGINT (Ctrl-C) to the sweep: SIGTERM to each worker process that runs a
    job (all of them without ``busy``, the markers' folder; the STOP marker there says which
    signal came); the sweep then ends when their jobs have
    returned (joblib raises the first one's interruption). Before it lets joblib go on, it
    waits until no job holds its run directory: once the first interruption reaches joblib
    it kills every worker, and on a busy machine a job still finishing its step would die
    before saving last.pt and writing "interrupted"."""
    running = None
    if busy is not None:
        said = Path(busy, f".{STOP}-{os.getpid()}")  # whole when seen: written, then renamed
        said.write_text("Ctrl-C" if signum == signal.SIGINT else "SIGTERM")
        said.replace(Path(busy, STOP))
        running = {int(m.name.split("-")[1]) for m in Path(busy).glob("busy-*")}
    for worker in multiprocessing.active_children():
        if worker.pid is not None and (running is None or worker.pid in running):
            try:
                os.kill(worker.pid, signal.SIGTERM)  # a job ignores SIGINT (MarksBusy)
            except ProcessLookupError:  # ended in between
                pass
    if sweep_dir is not None:
        _wait_for_jobs(Path(sweep_dir), GRACE_S)


def _wait_for_jobs(sweep_dir: Path, grace_s: float) -> None:
    """Until no job directory's lock is held (every job has recorded why it ended), at most
    ``grace_s`` seconds."""
    from attnlab.runs.rundir import RunDir

    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not any(RunDir(lock.parent).lock_holder() for lock in sweep_dir.glob("*/.lock")):
            return
        time.sleep(0.1)


def end_idle_workers() -> None:
    """loky's idle worker processes ended now, at the end of the command that launched them
    (``attnlab.cli.run``), instead of at the interpreter's exit, where loky asks each to quit
    and waits while it unloads torch (1.3 s after every local sweep's summary). Only when no
    job is pending: a stopped sweep whose jobs are still saving is left to loky's own exit,
    which waits for them. Between the multiruns of one command (``attnlab sweep tuned``) the
    workers are kept and reused."""
    import sys

    loky = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(loky, "_executor", None) if loky is not None else None
    pending = getattr(executor, "_pending_work_items", None)  # None: not a loky we know
    if executor is not None and pending is not None and not pending:
        executor.shutdown(wait=True, kill_workers=True)


class StopHeld:
    """Ctrl-C and SIGTERM held from the launcher's setup to its first launch (in the main
    thread). Hydra writes the sweep's folder and multirun.yaml in between: a KeyboardInterrupt
    inside OmegaConf there leaves a half-built config, whose next use fails with an unrelated
    error. ``release`` puts the handlers back and raises the signal that came, as the
    launch's own stop ends, before any job starts. A second signal is raised at once."""

    def __init__(self) -> None:
        self.came: int | None = None
        self.previous = {s: signal.signal(s, self._hold) for s in (signal.SIGINT, signal.SIGTERM)}

    def _hold(self, signum: int, frame: object) -> None:
        if self.came is not None:
            self.release()
        self.came = signum

    def release(self) -> None:
        from attnlab.runtime import Interrupted

        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
        if self.came is not None:
            raise KeyboardInterrupt() if self.came == signal.SIGINT else Interrupted()


class ParallelLauncher(JoblibLauncher):
    def __init__(self, jobs_per_gpu: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs_per_gpu = jobs_per_gpu
        self.held: StopHeld | None = None

    def setup(self, **kwargs: Any) -> None:
        super().setup(**kwargs)
        if threading.current_thread() is threading.main_thread():
            self.held = StopHeld()

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from attnlab.runtime import gpu_ids, jobs_per_gpu

        held, self.held = self.held, None
        if held is not None:
            held.release()
        gpus = gpu_ids()
        if not gpus:
            return self._launch(job_overrides, initial_job_idx)
        task_function = self.task_function
        with tempfile.TemporaryDirectory(prefix="attnlab_gpu_slots_") as slots:
            per_gpu = jobs_per_gpu(self.jobs_per_gpu)
            for k in range(len(gpus) * per_gpu):
                Path(slots, f"slot-{k}-gpu-{gpus[k % len(gpus)]}.lock").touch()  # spread first
            self.task_function = OnGpuSlot(task_function, slots)
            try:
                return self._launch(job_overrides, initial_job_idx)
            finally:
                self.task_function = task_function

    def _launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        if threading.current_thread() is not threading.main_thread():
            return super().launch(job_overrides, initial_job_idx)
        sweep_dir = str(self.config.hydra.sweep.dir) if self.config is not None else None
        task_function = self.task_function
        with tempfile.TemporaryDirectory(prefix="attnlab_busy_") as busy:
            self.task_function = MarksBusy(task_function, busy)
            forward = functools.partial(forward_to_workers, busy=busy, sweep_dir=sweep_dir)
            previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                with ctrl_c_kept_from_workers(busy):
                    try:
                        runs = super().launch(UntilStopped(job_overrides, busy), initial_job_idx)
                    except BaseException as err:
                        raise_if_stopped(busy, err)
                        raise
                raise_if_stopped(busy)
                return runs
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
                self.task_function = task_function
