"""Inputs a hostile user gives, each refused or named in one line (issue 41, the inputs
slice): a huge train.threads, data.limit equal to its pool, train.freeze without init_from,
fixed threads over fewer CPUs, and a data export forced over an earlier one."""

from __future__ import annotations

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
