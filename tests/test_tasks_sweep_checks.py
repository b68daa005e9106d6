"""A sweep checks every job's config before its first job starts (issue 41, items 13 and 14):
a job that would be refused ends the sweep in one line with exit status 2, before anything
trains or is written, and a sweep run again with its values in another order, or another
sweep in the same folder, is refused whole, its record left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.runs import checksums, one_line_error, unchanged

BASIC = ["preset=tiny", "train.threads=1", "hydra/launcher=basic"]


def refused_up_front(res, sweep: Path, *words: str) -> None:
    """One line, exit 2, naming the job and why; no job folder, no multirun.yaml."""
    one_line_error(res, "checked before any job started", *words)
    assert "complete" not in res.stdout, res.stdout
    assert not sweep.exists() or not any(sweep.iterdir()), sorted(sweep.rglob("*"))


@pytest.mark.parametrize(
    "axes, words",
    [
        (["model=attention,ctc", "train.freeze=[decoder]"], ["sweep job 1", "no part 'decoder'"]),
        (["model=fixed", "model.stride=4,3"], ["sweep job 1", "model.stride"]),
        (["model=fixed", "train.steps=30,0"], ["sweep job 1", "train.steps"]),
    ],
    ids=["freeze", "stride", "steps"],
)
def test_a_job_that_would_be_refused_refuses_the_sweep(attnlab_run, tmp_path, axes, words):
    sweep = tmp_path / "s"
    res = attnlab_run("sweep", "lengths", *BASIC, "seed=0", *axes, f"hydra.sweep.dir={sweep}",
                      cwd=tmp_path)  # fmt: skip
    refused_up_front(res, sweep, *words)


def test_a_limit_over_the_pool_refuses_the_sweep(attnlab_run, tmp_path):
    pool = tmp_path / "pool"
    res = attnlab_run("data", "export", pool, "--n", "40", "--lengths", "1-3", "preset=tiny",
                      cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    sweep = tmp_path / "s"
    res = attnlab_run(
        "sweep", "lengths", *BASIC, "seed=0", "model=fixed", "data=folder",
        f"data.path={pool}", "data.train_lengths=[1,3]", "data.limit=10,500",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    refused_up_front(res, sweep, "sweep job 1", "data.limit=500", str(pool))


@pytest.fixture
def swept_copy(tiny_sweep, tmp_path) -> Path:
    """A copy of the session's tiny sweep (model=fixed,attention seed=0, both complete)."""
    res, sweep = tiny_sweep
    assert res.returncode == 0, res.stderr[-3000:]
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy, ignore=shutil.ignore_patterns(".lock", ".submitit"))
    return copy


@pytest.mark.parametrize(
    "axes, words",
    [
        (["model=attention,fixed", "seed=0"], ["sweep job 0", "another order"]),
        (
            ["model=ctc", "seed=0"],
            # the recorded overrides, sorted (Hydra's job record writes the bool as True)
            ["sweep job 0", "a job run with [eval.figures=", " eval.maps_k=1 model=fixed "],
        ),
    ],
    ids=["reordered", "another-sweep"],
)
def test_a_rerun_that_would_refuse_jobs_is_refused_whole(attnlab_run, swept_copy, axes, words):
    before = checksums(swept_copy)
    res = attnlab_run("sweep", "lengths", *BASIC, *axes, f"hydra.sweep.dir={swept_copy}",
                      cwd=swept_copy.parent)  # fmt: skip
    one_line_error(res, "checked before any job started", *words)
    assert "complete" not in res.stdout, res.stdout  # no summary of the earlier sweep
    unchanged(swept_copy, before)  # multirun.yaml, every job's record, as they were
