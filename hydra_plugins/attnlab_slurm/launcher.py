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

Without accounting the launcher waits itself (``wait_for_jobs``), through submitit's public
``Job`` API only: a job is done once its result files exist (``job.paths``, for each of its
tasks: ``job.task(k)``), or once squeue says it ended and no result file came in the 15 s
submitit allows a slow file system; only then is ``job.results()`` asked, which no longer
waits. submitit's job-state watcher (which asks sacct) is never asked, so nothing logs
"Bypassing sacct error". Polls follow submitit's schedule: 2, 4, 8 ... s after submission,
then at most 10 minutes apart; result files are looked for every second. A Ctrl-C ends the
wait as it ends submitit's, the jobs left running on SLURM.

Hydra imports every module under ``hydra_plugins`` whenever an app starts, so submitit is only
imported once a sweep is launched, as in the plugin.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
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
RESULT_WAIT_S = 15.0  # how long a job that has ended may take to show its result files
MAX_POLL_S = 600.0  # squeue is asked at least this often (submitit's SlurmJob: sacct)


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
        ended: dict[str, str] = {}
        if self._sacct_error:
            ended = wait_for_jobs(jobs, SqueueStates())
        return [
            job_return(job, ovr, ended.get(job.job_id))
            for job, ovr in zip(jobs, job_overrides, strict=True)
        ]

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


def job_return(job: Any, overrides: Sequence[str], ended_as: str | None = None) -> JobReturn:
    """The ``JobReturn`` of a finished job; a failed one, holding submitit's error, when the
    job left no result or failed in submitit's code around the task. ``ended_as``: the state
    in which squeue saw the job end without a result (``wait_for_jobs``); submitit is then
    not asked, as it would wait for a state that only sacct gives it."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    if ended_as is not None:
        err: Exception = UncompletedJobError(no_result_message(job, ended_as))
        what = f"ended without a result (state {ended_as})"
    else:
        try:
            return job.results()[0]
        except FailedJobError as failed:  # an exception in submitit's code: in its logs
            err, what = failed, "failed outside its task"
        except UncompletedJobError as uncompleted:  # killed, out of memory, node lost, ...
            err, what = uncompleted, f"ended without a result (state {job.state})"
        except Exception as other:
            err, what = other, f"failed outside its task ({type(other).__name__}: {other})"
    log.error("job %s %s; submitit's logs: %s", job.job_id, what, job.paths.folder)
    ret = JobReturn(overrides=list(overrides), status=JobStatus.FAILED)
    ret.return_value = err  # raised by Hydra once every job has ended
    return ret


def no_result_message(job: Any, state: str) -> str:
    """What submitit says of a job that ended without a result, its error stream's end
    included."""
    lines = [f"Job {job.job_id} has not produced any output (state: {state})"]
    stderr = job.stderr()  # None: no error stream yet
    if stderr:
        lines += ["Error stream produced:", "-" * 40, *stderr.splitlines()[-40:]]
    else:
        lines.append(f"No error stream produced. Check: {job.paths.stdout}")
    return "\n".join(lines)


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


def has_results(job: Any) -> bool:
    """Whether every task of ``job`` has written its result file (what ``job.done()`` looks
    for before it asks the scheduler)."""
    folder = job.paths.folder
    try:  # refresh a network file system's view of the folder, as submitit does
        folder.chmod(folder.stat().st_mode)
    except OSError:
        pass
    return all(job.task(k).paths.result_pickle.exists() for k in range(job.num_tasks))


def wait_for_jobs(
    jobs: Sequence[Any], states: SqueueStates, result_wait_s: float = RESULT_WAIT_S
) -> dict[str, str]:
    """Wait until every job has its result files, or has ended (``states``) and shown none
    for ``result_wait_s``; the states of those that ended without, by job id. ``states`` is
    asked as often as submitit asks sacct; result files are looked for every second."""
    started = last_poll = time.monotonic()
    states.update()
    waiting = {job.job_id: job for job in jobs}
    seen_ended: dict[str, float] = {}  # job id -> when the job was first seen ended
    without: dict[str, str] = {}
    while True:
        now = time.monotonic()
        for job_id, job in list(waiting.items()):
            if has_results(job):
                del waiting[job_id]
            elif states.get(job_id) not in ENDED:
                seen_ended.pop(job_id, None)  # not ended, or running again
            elif now - seen_ended.setdefault(job_id, now) >= result_wait_s:
                without[job_id] = states.get(job_id)
                del waiting[job_id]
        if not waiting:
            return without
        time.sleep(1.0)
        now = time.monotonic()
        if now - last_poll > min(MAX_POLL_S, max(2.0, (now - started) / 2)):
            states.update()
            last_poll = time.monotonic()


class SqueueStates:
    """The states of this user's jobs, as ``squeue`` lists them: every job of this user (by
    uid), which also succeeds once squeue has forgotten some of them (asking for job ids that
    squeue no longer knows fails). ``--states=all`` keeps the jobs that have ended until
    squeue forgets them; a job listed before and listed no longer is ``GONE``."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        self.failing = False  # whether the last call failed (said once until one succeeds)

    def command(self) -> list[str]:
        fmt = "--format=%i|%T|%N"
        return ["squeue", "--noheader", "--array", "--states=all", fmt, f"--user={os.getuid()}"]

    def update(self) -> None:
        """Ask squeue; when it fails, the states stay as they were (said once)."""
        try:
            out = subprocess.run(
                self.command(), capture_output=True, text=True, timeout=60, check=False
            )
            why = "" if out.returncode == 0 else out.stderr.strip() or f"exit {out.returncode}"
        except (OSError, subprocess.TimeoutExpired) as err:
            why = str(err)
        if why:
            if not self.failing:
                log.warning("squeue failed (%s): job states as they were", why.splitlines()[0])
            self.failing = True
            return
        self.failing = False
        self.read(out.stdout)

    def read(self, text: str) -> None:
        """Take in squeue's output (``JOBID|STATE|NODES`` lines)."""
        listed = read_squeue(text)
        for job_id in self.states.keys() - listed.keys():
            self.states[job_id] = GONE
        self.states.update(listed)

    def get(self, job_id: str) -> str:
        """``job_id``'s state: squeue's, ``GONE``, or ``UNKNOWN`` (never listed)."""
        return self.states.get(job_id, "UNKNOWN")


def read_squeue(text: str) -> dict[str, str]:
    """Job id -> state from ``squeue --format=%i|%T|...`` lines; an array's pending tasks
    listed on one line (``12_[0-3,7%2]``) give one entry each."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 2 or not fields[0] or "." in fields[0]:  # a job step: not a job
            continue
        state = (fields[1].split() or ["UNKNOWN"])[0].upper()
        for job_id in expand_job_id(fields[0]):
            states[job_id] = state
    return states


def expand_job_id(job_id: str) -> list[str]:
    """``12_[0-2,5%2]`` -> ``12_0 12_1 12_2 12_5``; any other id as it is."""
    match = re.fullmatch(r"(\d+)_\[([\d,-]+)(?:%\d+)?\]", job_id)
    if match is None:
        return [job_id]
    ids = []
    for part in match.group(2).split(","):
        low, _, high = part.partition("-")
        ids += [f"{match.group(1)}_{k}" for k in range(int(low), int(high or low) + 1)]
    return ids
