"""Shared pytest fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import numpy as np

# --- one glyph-bank cache for the session's processes, never the user's ---------------------

_CACHE: list[str] = []
_OWNER = "ATTNLAB_TEST_CACHE_OWNER"  # the pid of the process that made the folder


def pytest_configure(config):
    """Every process of the session (this one, its pytest-xdist workers and the CLI
    subprocesses, which inherit the environment) keeps its glyph banks in one fresh folder
    (attnlab.data.bank_cache): a bank is built once per session, and nothing is read from or
    left in ~/.cache. A worker uses the folder of the process that started it."""
    import tempfile

    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_OWNER):
        _share_the_cpus()
        return  # the controller made it and removes it
    _CACHE.append(tempfile.mkdtemp(prefix="attnlab-test-cache-"))
    os.environ["ATTNLAB_CACHE"] = _CACHE[0]
    os.environ[_OWNER] = str(os.getpid())


def _share_the_cpus() -> None:
    """A pytest-xdist worker's own torch (the tests that train or read in-process) gets its
    share of the CPUs, not all of them: with a worker per CPU, torch's default of a thread per
    core ran each worker's two threads against the other worker's (a tiny training took 115 s
    in the suite, 9 s with its share). Subprocesses are not affected: attnlab sets their
    threads itself (train.thread_policy)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    import torch

    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // workers))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when it is there
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (make test): one worker per CPU this process may use (a cgroup's or
    taskset's share, not the machine's count); PYTEST_XDIST_AUTO_NUM_WORKERS still wins."""
    return len(os.sched_getaffinity(0))


def pytest_unconfigure(config):
    import shutil

    for folder in _CACHE:
        shutil.rmtree(folder, ignore_errors=True)


# --- the slow tests -----------------------------------------------------------------------------

# A test that needs one of these (directly or through another fixture) waits for trainings or
# sweeps in subprocesses, or for a browser: it is marked slow like the tests marked by hand.
SLOW_FIXTURES = {
    "trained", "killed_and_resumed", "swept", "tiny_sweep", "width_sweep", "curve", "browser",
    "start_sweep", "study",
}  # fmt: skip


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # The modules with the most slow tests first, each kept whole and in its order. This is
    # the order of a run without workers (``-n 0``) only: under ``--dist loadfile``
    # pytest-xdist hands out modules by their number of tests, most first, unless
    # ``--no-loadscope-reorder`` is given (make test does not: replayed on measured
    # durations, its order ends both workers within a second of each other).
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])


# --- CLI subprocesses (test_cli.py, test_tasks_sweep.py, test_wheel.py) -------------------------


@pytest.fixture(scope="session")
def cli_env() -> dict[str, str]:
    """The environment of a real ``attnlab`` subprocess: no repo on PYTHONPATH, no inherited
    Hydra or colour settings, a wide terminal so that help and errors are not wrapped."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR")}
    env.update({"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"})
    return env


@pytest.fixture(scope="session")
def attnlab_cli(cli_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``attnlab_cli(*args, cwd=DIR)`` runs ``python -m attnlab.cli ARGS`` in DIR, so that
    outputs/ and multirun/ land there; ``python=`` picks another interpreter."""

    def run(
        *args: object, cwd: Path, python: str = sys.executable, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-m", "attnlab.cli", *map(str, args)],
            cwd=cwd,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


@pytest.fixture(scope="session")
def attnlab_run() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``attnlab_run(*args, cwd=DIR)``: ``attnlab ARGS`` in DIR inside this process
    (tests/helpers/cli.py), for tests where the subprocess is not what is tested; it returns
    what ``attnlab_cli`` returns, without paying torch's and Hydra's import again."""
    from helpers.cli import run_cli

    return run_cli


# --- one tiny sweep for the whole session (test_tasks_sweep.py, test_api.py, ...) --------


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory, attnlab_cli, worker_id):
    """``(result, SWEEP)``: ``attnlab sweep lengths preset=tiny seed=0`` on submitit_local.

    Under pytest-xdist the sweep still runs once for the whole session, into a folder the
    workers share, under a lock (as ``trained``); each worker then reads its own copy (a
    report of a sweep locks its runs), with the command's output naming that copy."""
    import json
    import shutil

    from filelock import FileLock

    if worker_id == "master":
        return _sweep_tiny(attnlab_cli, tmp_path_factory.mktemp("sweep"))
    shared = tmp_path_factory.getbasetemp().parent / "tiny_sweep"
    shared.mkdir(exist_ok=True)
    with FileLock(shared / "sweep.lock"):
        done = shared / "result.json"
        if not done.is_file():
            res, _ = _sweep_tiny(attnlab_cli, shared)
            done.write_text(json.dumps([res.args, res.returncode, res.stdout, res.stderr]))
    args, code, out, err = json.loads((shared / "result.json").read_text())
    sweep = tmp_path_factory.mktemp("sweep") / "sweep"
    shutil.copytree(shared / "sweep", sweep, ignore=shutil.ignore_patterns(".lock"))
    out, err = (text.replace(str(shared / "sweep"), str(sweep)) for text in (out, err))
    return subprocess.CompletedProcess(args, code, out, err), sweep


def _sweep_tiny(attnlab_cli, cwd: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    sweep = cwd / "sweep"
    result = attnlab_cli(
        "sweep", "lengths", "preset=tiny", "seed=0", "eval.maps_k=1", "eval.figures=true",
        "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5", f"hydra.sweep.dir={sweep}",
        cwd=cwd, timeout=600,
    )  # fmt: skip
    return result, sweep


# --- one trained run per reader for the whole session (tiny; the numbers mean nothing) ----

# One thread: runs that tests compare bit for bit (a resumed run with the session's trained
# one) train at the same thread count whatever the load (train.thread_policy=adaptive would
# follow the load, and 1- and 2-thread runs differ in the last bits).
TINY = ["preset=tiny", "train.progress=plain", "train.threads=1"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory, attnlab_cli, worker_id) -> dict[str, Path]:
    """``{"attention": RUN, "fixed": RUN}``: each lab reader trained once with preset=tiny.
    Tests that change a run work on a copy (``copy_run``).

    Under pytest-xdist each reader is still trained once for the whole session: into a
    folder the workers share, under a lock per reader (the workers start from different
    readers, so two trainings run at once); each worker then reads its own copy, since a
    process that reads a run locks it (two workers reading one run would refuse each other).
    """
    import shutil

    from filelock import FileLock

    mine = tmp_path_factory.mktemp("trained")
    kinds = ["attention", "fixed"]
    if worker_id == "master":
        for kind in kinds:
            _train(attnlab_cli, mine / kind)
        return {kind: mine / kind for kind in kinds}
    shared = tmp_path_factory.getbasetemp().parent / "trained"
    shared.mkdir(exist_ok=True)
    if int(worker_id.removeprefix("gw")) % 2:
        kinds.reverse()
    out = {}
    for kind in kinds:
        with FileLock(shared / f"{kind}.lock"):
            if not (shared / f"{kind}.done").is_file():
                shutil.rmtree(shared / kind, ignore_errors=True)
                _train(attnlab_cli, shared / kind)
                (shared / f"{kind}.done").touch()
        out[kind] = mine / kind
        shutil.copytree(shared / kind, out[kind], ignore=shutil.ignore_patterns(".lock"))
    return {kind: out[kind] for kind in sorted(out)}


def _train(attnlab_cli, run: Path) -> None:
    kind = run.name
    res = attnlab_cli("train", *TINY, f"model={kind}", f"hydra.run.dir={run}", cwd=run.parent)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """pytest-xdist's worker name (``gw0``, ...), or ``master`` without workers (xdist's own
    fixture of that name, here too when xdist is not installed or is turned off)."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "master"


@pytest.fixture
def copy_run(tmp_path) -> Callable[[Path], Path]:
    """``copy_run(RUN)``: a private copy of a trained run directory (lock file left out)."""
    import shutil

    def copy(run: Path, name: str = "run") -> Path:
        dest = tmp_path / name
        shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
        return dest

    return copy


# --- kill a training and resume it (test_training.py, test_data_sources.py) ---------------


@pytest.fixture
def killed_and_resumed(attnlab_cli, attnlab_run):
    """``killed_and_resumed(args, tmp_path) -> (whole, cut, step)``: trains ``args`` straight
    through into ``whole``, and into ``cut`` with a SIGKILL right after its first checkpoint,
    then resumes ``cut``; asserts both end with the same metrics, weights and history.
    ``whole``, the reference, trains in this process (``attnlab_run``); the killed training
    and the resume are real processes of their own, as a user's are.

    Both trainings get ``train.threads=1`` unless ``args`` name a count: the adaptive default
    follows the load of the moment (README, "threads"), and two thread counts sum a
    convolution's gradient in two orders, so under a parallel suite the weights would differ
    in their last bits for a reason that is not resume's (CI's stop 48 saw exactly that)."""
    import json
    import signal
    import time

    import torch
    from helpers.runs import history_cells

    def run(args: list[str], tmp_path: Path) -> tuple[Path, Path, int]:
        if not any(a.startswith("train.threads=") for a in args):
            args = [*args, "train.threads=1"]
        whole, cut = tmp_path / "whole", tmp_path / "cut"
        res = attnlab_run("train", *args, f"hydra.run.dir={whole}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        cmd = [sys.executable, "-m", "attnlab.cli", "train", *args, f"hydra.run.dir={cut}"]
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.time() + 120
        while not (cut / "checkpoints" / "last.pt").exists() and proc.poll() is None:
            assert time.time() < deadline
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (cut / "metrics.json").exists():
            pytest.fail("the run finished before it could be killed")
        step = torch.load(cut / "checkpoints" / "last.pt", weights_only=True)["step"]
        res = attnlab_cli("train", *args, f"hydra.run.dir={cut}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        a = json.loads((whole / "metrics.json").read_text())
        b = json.loads((cut / "metrics.json").read_text())
        assert a["val"] == b["val"] and a["best"] == b["best"]
        wa = torch.load(whole / "checkpoints" / "last.pt", weights_only=True)
        wb = torch.load(cut / "checkpoints" / "last.pt", weights_only=True)
        for entry in ("model", "trained"):  # trained: optim.ema's weights as trained
            assert (entry in wa) == (entry in wb), entry
            for key, value in wa.get(entry, {}).items():
                assert torch.equal(value, wb[entry][key]), (entry, key)
        assert history_cells(whole) == history_cells(cut)  # train_seconds: the clock's
        return whole, cut, step

    return run


# --- a synthetic strip as an 8-bit image (test_data_images.py, test_faults_cli.py) ------------


@pytest.fixture(scope="session")
def ref8() -> np.ndarray:
    """A synthetic strip as 8-bit grey (32, W), its paper cleaned to pure white so that a
    transparent background has something exact to stand for."""
    import numpy as np
    import torch

    from attnlab.config import DataConfig
    from attnlab.data.strips import StripSynth

    gen = torch.Generator().manual_seed(3)
    strip = StripSynth(DataConfig()).sample(torch.tensor([4]), gen)
    a = np.round(strip.images[0, :, : int(strip.widths[0])].numpy() * 255).astype(np.uint8)
    return np.where(a > 200, 255, a).astype(np.uint8)


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module's tests (the benchmark's timings), as it was after."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
