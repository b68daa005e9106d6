"""hydra-submitit-launcher's SLURM launcher, changed in how it waits for the jobs it submits.

``hydra/launcher=slurm`` (``conf/hydra/launcher/slurm.yaml``) selects it. Submission is the
plugin's own; the differences are all after it:

- It waits for every job. The plugin returns ``[j.results()[0] for j in jobs]``, so the first
  job that ends without a result stops the wait and the sweep ends while the others still
  run. A job without a result is one that died outside Python (killed, out of memory, node
  lost) or failed in submitit's code around the task. A task's own errors are not affected:
  those come back as failed results. Here such a job becomes a failed ``JobReturn`` holding
  submitit's error, which Hydra raises once every job has ended.
- It reads job states from ``squeue`` when ``sacct`` does not answer. submitit uses ``sacct``
  to find out whether a job that has no result file yet has ended. On a cluster without
  accounting, sacct fails ("Slurm accounting storage is disabled"), every state stays
  UNKNOWN, a job that died outside Python is waited for forever, and each poll logs
  "Bypassing sacct error". sacct is asked once, for the first job submitted, and if it fails
  the states come from squeue instead (logged once). squeue forgets a job MinJobAge (300 s by
  default) after it ends, so a job that squeue listed before and lists no longer has ended. On
  a cluster with accounting submitit asks sacct, exactly as before.

Hydra imports every module under ``hydra_plugins`` whenever an app starts, so submitit is only
imported once a sweep is launched, as in the plugin.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher import submitit_launcher
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf

log = logging.getLogger(__name__)

GONE = "GONE"  # the state of a job that squeue listed before and lists no longer
# squeue states of a job that will not run again. Anything else, including states not listed
# here (CONFIGURING, SUSPENDED, REQUEUE_HOLD, PREEMPTED before a requeue, ...), counts as not
# ended: at worst the wait lasts until squeue forgets the job.
ENDED = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY"}
    | {"REVOKED", "TIMEOUT", GONE}
)


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    # None until the first launch has asked sacct; then why sacct failed ("" when it answered).
    _sacct_error: str | None = None

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        jobs = self._submit(job_overrides, initial_job_idx)
        if self._sacct_error is None:
            self._sacct_error = sacct_error(jobs[0].job_id)
            if self._sacct_error:
                log.info(
                    "sacct does not answer (%s): job states come from squeue", self._sacct_error
                )
        if self._sacct_error:
            watcher = squeue_watcher()
            for job in jobs:
                watch_with(job, watcher)
        return [job_return(job, ovr) for job, ovr in zip(jobs, job_overrides, strict=True)]

    def _submit(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
        """The submitted ``submitit.Job``s: the plugin's ``BaseSubmititLauncher.launch``
        (hydra-submitit-launcher 1.2.0) up to its ``return [j.results()[0] for j in jobs]``,
        unchanged but for formatting. That method builds the executor and waits for the jobs
        in one piece: the only way to wait differently is to copy the part before the wait."""
        import submitit  # lazily, as the plugin does

        assert self.config is not None

        num_jobs = len(job_overrides)
        assert num_jobs > 0
        params = self.params
        # build executor
        init_params = {"folder": self.params["submitit_folder"]}
        specific_init_keys = {"max_num_timeout"}

        init_params.update(
            **{f"{self._EXECUTOR}_{x}": y for x, y in params.items() if x in specific_init_keys}
        )
        init_keys = specific_init_keys | {"submitit_folder"}
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)

        # specify resources/parameters
        baseparams = set(OmegaConf.structured(BaseQueueConf).keys())
        params = {
            x if x in baseparams else f"{self._EXECUTOR}_{x}": y
            for x, y in params.items()
            if x not in init_keys
        }
        executor.update_parameters(**params)

        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {self.config.hydra.sweep.dir}")
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            mode = int(str(self.config.hydra.sweep.mode), 8)
            os.chmod(sweep_dir, mode=mode)

        job_params: list[Any] = []
        for idx, overrides in enumerate(job_overrides):
            idx = initial_job_idx + idx
            lst = " ".join(filter_overrides(overrides))
            log.info(f"\t#{idx} : {lst}")
            job_params.append(
                (
                    list(overrides),
                    "hydra.sweep.dir",
                    idx,
                    f"job_id_for_{idx}",
                    Singleton.get_state(),
                )
            )

        return executor.map_array(self, *zip(*job_params, strict=True))


def job_return(job: Any, overrides: Sequence[str]) -> JobReturn:
    """The ``JobReturn`` of a finished job; a failed one, holding submitit's error, when the
    job left no result or failed in submitit's code around the task."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    try:
        return job.results()[0]
    except Exception as err:
        if isinstance(err, FailedJobError):  # an exception in submitit's code: in its logs
            what = "failed outside its task"
        elif isinstance(err, UncompletedJobError):  # killed, out of memory, node lost, ...
            what = f"ended without a result (state {job.state})"
        else:
            what = f"failed outside its task ({type(err).__name__}: {err})"
        log.error("job %s %s; submitit's logs: %s", job.job_id, what, job.paths.folder)
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=err)


def sacct_error(job_id: str) -> str:
    """Why ``sacct`` cannot tell the state of ``job_id`` ("" when it can): submitit's own
    query, for that job's array."""
    command = ["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job_id.split("_")[0]]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    if out.returncode == 0:
        return ""
    return (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[0]


def watch_with(job: Any, watcher: Any) -> None:
    """Have ``job`` (and the per-task jobs of a multi-task job) ask ``watcher`` for its state
    instead of the watcher that submitit's ``SlurmJob`` class shares across the process."""
    for each in (job, *job._sub_jobs):
        each.watcher = watcher
    watcher.register_job(job.job_id)


def squeue_watcher() -> Any:
    """A submitit job-state watcher asking ``squeue``, polling as often as submitit's."""
    return _squeue_watcher_class()(delay_s=600)


@functools.cache
def _squeue_watcher_class() -> type:
    from submitit.slurm.slurm import SlurmInfoWatcher

    class SqueueWatcher(SlurmInfoWatcher):
        """``SlurmInfoWatcher`` with squeue instead of sacct. It lists every job of this user
        (by uid), which also succeeds once squeue has forgotten some of them: asking for job
        ids that squeue no longer knows fails. States are squeue's (``--states=all`` keeps
        the jobs that have ended until squeue forgets them), plus ``GONE``."""

        def _make_command(self) -> list[str] | None:
            if not self._registered - self._finished:
                return None
            fmt = "--format=%i|%T|%N"
            return ["squeue", "--noheader", "--array", "--states=all", fmt, f"--user={os.getuid()}"]

        def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
            text = string.decode() if isinstance(string, bytes) else string
            info = super().read_info("JobID|State|NodeList\n" + text)
            for job_id in self._registered - self._finished:
                if job_id not in info and self._info_dict.get(job_id):
                    info[job_id] = {"JobID": job_id, "State": GONE, "NodeList": ""}
            return info

        def is_done(self, job_id: str, mode: str = "standard") -> bool:
            return self.get_state(job_id, mode=mode).upper() in ENDED

    return SqueueWatcher
