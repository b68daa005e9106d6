"""Hydra's joblib launcher, with its worker processes ended when the sweep is stopped.

``hydra/launcher=parallel`` (``conf/hydra/launcher/parallel.yaml``, the default of
``attnlab sweep lengths``) selects it. Launching is the plugin's own (loky worker processes);
the one difference is what SIGTERM to the sweep's own process does. Ctrl-C in a terminal
reaches the whole process group, workers included, but ``kill PID`` or a scheduler's signal
to the sweep reaches only its main process: by default that process dies at once and the
workers go on training, orphaned. Here the main process passes SIGTERM on to every worker,
whose job records itself as interrupted (``attnlab.runtime.sigterm_as_interrupt``) and
returns that error; joblib then dispatches no further job, ends its workers and raises it,
so the command ends with no process left behind. Each run resumes from its ``last.pt``
when the sweep is run again.

With ``pre_dispatch: n_jobs`` and ``batch_size: 1`` (parallel.yaml) no job is queued
behind a running one, so no queued job starts once the sweep has been stopped.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher


def forward_to_workers(signum: int, frame: object) -> None:
    """SIGTERM to the sweep: the same signal to each worker process; the sweep then ends
    when their jobs have returned (joblib raises the first one's interruption)."""
    for worker in multiprocessing.active_children():
        if worker.pid is not None:
            try:
                os.kill(worker.pid, signum)
            except ProcessLookupError:  # ended in between
                pass


class ParallelLauncher(JoblibLauncher):
    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        if threading.current_thread() is not threading.main_thread():
            return super().launch(job_overrides, initial_job_idx)
        previous = signal.signal(signal.SIGTERM, forward_to_workers)
        try:
            return super().launch(job_overrides, initial_job_idx)
        finally:
            signal.signal(signal.SIGTERM, previous)
