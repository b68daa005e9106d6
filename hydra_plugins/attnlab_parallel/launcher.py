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
behind a running one, so no queued job starts once the sweep has been stopped.

With GPUs (``attnlab.runtime.gpu_ids``, or ATTNLAB_FAKE_GPUS in tests) each job gets its
GPU through CUDA_VISIBLE_DEVICES, set in its worker before the job runs (before CUDA starts
there): the sweep has ``jobs_per_gpu`` slots per GPU, one lock file each, and a job holds
the first free slot while it runs, so no more than ``jobs_per_gpu`` jobs share a GPU.
"""

from __future__ import annotations

import fcntl
import functools
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
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


class MarksBusy:
    """The task function, run with the marker ``busy-<pid>`` under ``folder`` while it runs,
    so that a stopped sweep signals only the workers that run a job: an idle loky worker has
    SIGTERM's default action, and its death breaks the pool, whereupon loky kills the busy
    workers before their jobs say how they ended. A job that would start once the sweep is
    stopping (``STOP`` there) does not start."""

    def __init__(self, task_function: Any, folder: str) -> None:
        self.task_function = task_function
        self.folder = folder

    def __call__(self, cfg: Any) -> Any:
        from attnlab.runtime import Interrupted

        folder = Path(self.folder)
        if (folder / STOP).exists():
            raise Interrupted()
        mark = folder / f"busy-{os.getpid()}"
        mark.touch()
        # The terminal's Ctrl-C reaches this worker too: the sweep's main process passes it
        # on (as SIGTERM, once, so the job stops after a whole step: a second signal would
        # stop it at once); the stop's cause is the marker's text (STOP_CAUSE).
        ctrl_c = _ignore_sigint()
        os.environ[STOP_CAUSE] = str(folder / STOP)
        try:
            return self.task_function(cfg)
        finally:
            mark.unlink(missing_ok=True)
            os.environ.pop(STOP_CAUSE, None)
            if ctrl_c is not None:
                signal.signal(signal.SIGINT, ctrl_c)


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
        Path(busy, STOP).write_text("Ctrl-C" if signum == signal.SIGINT else "SIGTERM")
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


class ParallelLauncher(JoblibLauncher):
    def __init__(self, jobs_per_gpu: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs_per_gpu = jobs_per_gpu

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from attnlab.runtime import gpu_ids, jobs_per_gpu

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
                return super().launch(job_overrides, initial_job_idx)
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
                self.task_function = task_function
