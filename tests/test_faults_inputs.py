"""Inputs a hostile user gives, each refused or named in one line (issue 41, the inputs
slice): a huge train.threads, data.limit equal to its pool, train.freeze without init_from,
fixed threads over fewer CPUs, and a data export forced over an earlier one."""

from __future__ import annotations

import csv
import logging
import os
import shutil
from pathlib import Path

import pytest
from helpers.runs import TINY, one_line_error

from attnlab.config import check_experiment
from attnlab.errors import UserError
from attnlab.tasks.compose import compose


@pytest.mark.parametrize("threads", [4096, 100000])
def test_huge_thread_counts_are_refused_by_the_config_check(threads):
    with pytest.raises(UserError, match=rf"^train\.threads={threads}: must be <= \d+"):
        check_experiment(compose(["preset=tiny", f"train.threads={threads}"]))
    check_experiment(compose(["preset=tiny", "train.threads=64"]))


def test_huge_threads_refused_before_anything_starts(attnlab_run, tmp_path):
    run = tmp_path / "r"
    res = attnlab_run("train", *TINY[:2], "train.threads=4096", f"hydra.run.dir={run}",
                      cwd=tmp_path)  # fmt: skip
    one_line_error(res, "train.threads=4096")
    assert not run.exists() or not any(run.iterdir())


def test_a_limit_equal_to_the_pool_is_not_called_unbalanced(caplog):
    from attnlab.data.limit import draw

    labels = ["1"] * 2 + ["12"] * 10 + ["123"] * 10  # length 1 is short of an equal share
    pool = list(range(len(labels)))
    with caplog.at_level(logging.INFO, logger="attnlab.train"):
        assert sorted(draw(pool, labels, len(pool), 0, "POOL")) == pool
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "the whole training pool of POOL" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="attnlab.train"):
        draw(pool, labels, 15, 0, "POOL")  # a part of it: length 1 really is short
    assert "not balanced by length" in caplog.text


def test_freezing_without_init_from_says_the_weights_are_random(caplog, tmp_path):
    from attnlab.runs.rundir import RunDir
    from attnlab.training.freeze import warn_random
    from attnlab.training.trainer import Trainer

    cfg = compose(["preset=tiny", "model=attention", "train.freeze=[encoder]"])
    with caplog.at_level(logging.WARNING, logger="attnlab.train"):
        Trainer(cfg, RunDir(tmp_path / "r"))
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "train.freeze=[encoder] with init_from=null" in line and "random" in line
    assert not (tmp_path / "r").exists()  # building a trainer writes nothing
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="attnlab.train"):
        warn_random([], None)  # nothing frozen
        warn_random(["encoder"], "RUN")  # frozen as loaded from RUN
    assert caplog.records == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_fixed_threads_over_fewer_cpus_are_named(caplog):
    """As under ``taskset -c 0``: this process's affinity cut to one CPU, 2 fixed threads."""
    import torch

    from attnlab.threads import governor

    cpus, threads = os.sched_getaffinity(0), torch.get_num_threads()
    try:
        os.sched_setaffinity(0, {min(cpus)})
        torch.set_num_threads(2)
        with caplog.at_level(logging.WARNING, logger="attnlab.threads"):
            assert governor("fixed", 2).threads == 2
        (record,) = caplog.records
        assert "fixed: 2 threads on 1 usable CPU(s)" in record.getMessage()
        caplog.clear()
        torch.set_num_threads(1)
        with caplog.at_level(logging.WARNING, logger="attnlab.threads"):
            governor("fixed", 1)
        assert caplog.records == []
    finally:
        os.sched_setaffinity(0, cpus)
        torch.set_num_threads(threads)


def _exported(folder: Path) -> tuple[list[str], list[str]]:
    with open(folder / "labels.csv", newline="") as f:
        listed = [row[0] for row in list(csv.reader(f))[1:]]
    return sorted(listed), sorted(p.name for p in folder.iterdir() if p.name != "labels.csv")


def test_a_forced_export_holds_exactly_what_its_labels_list(attnlab_run, tmp_path):
    out = tmp_path / "strips"
    (tmp_path / "keep").mkdir()
    for n in ("14", "6"):
        res = attnlab_run("data", "export", out, "--n", n, "--force", "preset=tiny", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        listed, there = _exported(out)
        assert len(listed) == int(n) and there == listed
    (out / "notes.txt").write_text("mine")  # not an export's file: kept
    res = attnlab_run("data", "export", out, "--n", "3", "--force", "preset=tiny", cwd=tmp_path)
    listed, there = _exported(out)
    assert len(listed) == 3 and there == sorted([*listed, "notes.txt"])
    # an LMDB forced over a folder export, and a folder export over the LMDB
    lmdb = ["--format", "lmdb", "--force", "preset=tiny"]
    for n in ("9", "4"):
        res = attnlab_run("data", "export", tmp_path / "db", "--n", n, *lmdb, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert sorted(p.name for p in (tmp_path / "db").iterdir()) == ["data.mdb"]
    shutil.copy(tmp_path / "db" / "data.mdb", out / "data.mdb")
    res = attnlab_run("data", "export", out, "--n", "5", "--force", "preset=tiny", cwd=tmp_path)
    listed, there = _exported(out)
    assert len(listed) == 5 and there == sorted([*listed, "notes.txt"])
