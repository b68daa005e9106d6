"""Shared pytest fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# --- CLI subprocesses (test_cli.py, test_sweep.py, test_wheel.py) -------------------------


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


# --- one trained run per reader for the whole session (tiny; the numbers mean nothing) ----

TINY = ["preset=tiny", "train.progress=plain"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory, attnlab_cli) -> dict[str, Path]:
    """``{"attention": RUN, "fixed": RUN}``: each lab reader trained once with preset=tiny.
    Tests that change a run work on a copy (``copy_run``)."""
    root = tmp_path_factory.mktemp("trained")
    out = {}
    for kind in ("attention", "fixed"):
        run = root / kind
        res = attnlab_cli("train", *TINY, f"model={kind}", f"hydra.run.dir={run}", cwd=root)
        assert res.returncode == 0, res.stderr
        out[kind] = run
    return out


@pytest.fixture
def copy_run(tmp_path) -> Callable[[Path], Path]:
    """``copy_run(RUN)``: a private copy of a trained run directory (lock file left out)."""
    import shutil

    def copy(run: Path, name: str = "run") -> Path:
        dest = tmp_path / name
        shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
        return dest

    return copy
