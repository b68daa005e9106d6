"""Checkpoints that must not be read, and one that cannot be written: each refused in one
line naming the file, on every path that loads or saves one (attnlab.runs.checkpoint)."""

from __future__ import annotations

import collections
import fractions
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.images import strip_png
from helpers.runs import TINY, one_line_error, run_limited


def _poison(run: Path) -> str:
    """Set one weight of the run's best.pt to NaN (a real file, rewritten as torch saves it);
    returns the tensor's name."""
    best = run / "checkpoints" / "best.pt"
    payload = torch.load(best, weights_only=True)
    name = sorted(k for k, v in payload["model"].items() if v.is_floating_point())[0]
    payload["model"][name].view(-1)[0] = float("nan")
    torch.save(payload, best)
    return name


def test_non_finite_weights_are_refused_at_load_on_every_path(
    trained, copy_run, attnlab_run, tmp_path
):
    import attnlab

    run = copy_run(trained["attention"])
    name = _poison(run)
    said = f"non-finite weights ({name}: 1 of "
    strip_png(tmp_path / "strip.png")
    best = str(run / "checkpoints" / "best.pt")
    commands = [
        ("read", tmp_path / "strip.png", "--run", run),
        ("eval", run, "eval.n=2"),
        ("export", run, tmp_path / "export"),
        ("train", *TINY, f"init_from={run}", f"hydra.run.dir={tmp_path / 'tuned'}"),
    ]
    for args in commands:
        res = attnlab_run(*args, cwd=tmp_path)
        one_line_error(res, said, "best.pt")
    assert not (run / "eval").exists() and not (tmp_path / "export").exists()
    assert not (tmp_path / "tuned" / "checkpoints").exists()
    with pytest.raises(attnlab.UserError, match=r"non-finite weights") as err:
        attnlab.load(run).read(tmp_path / "strip.png")
    assert best in str(err.value) and "\n" not in str(err.value)


def test_a_pickle_given_as_a_checkpoint_is_one_line_in_attnlab_words(cli_env, tmp_path):
    """A real subprocess: torch's own warning ("Detected pickle protocol ...") must not
    reach stderr, and the line is attnlab's, not torch's advice cut off mid-sentence."""
    strip_png(tmp_path / "strip.png")
    plain = tmp_path / "plain.pkl"
    with open(plain, "wb") as fh:
        pickle.dump(collections.OrderedDict(model={"w": [1.0]}, format=8), fh)
    res = subprocess.run(
        [sys.executable, "-m", "attnlab.cli", "read", tmp_path / "strip.png", "--run", plain],
        cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    one_line_error(res, f"{plain}: not an attnlab checkpoint (a Python pickle")
    assert "Warning" not in res.stderr and "PyTorch" not in res.stderr


def test_a_torch_file_holding_other_python_objects_is_one_line(attnlab_run, tmp_path):
    strip_png(tmp_path / "strip.png")
    foreign = tmp_path / "foreign.pt"  # a file torch.save wrote, holding a Python object
    torch.save({"model": {}, "format": 8, "step": fractions.Fraction(1, 3)}, foreign)
    res = attnlab_run("read", tmp_path / "strip.png", "--run", foreign, cwd=tmp_path)
    one_line_error(res, f"{foreign}: not an attnlab checkpoint (it holds Python objects")
    assert "Weights only load failed" not in res.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a real 160 KB disk (tmpfs, where this process may mount one): writing
    past it fails with ENOSPC, as on a full disk. None where mounting is not allowed."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(disk)], capture_output=True
    ).returncode == 0  # fmt: skip
    try:
        yield disk if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=True)


@pytest.mark.slow
def test_a_full_disk_while_saving_a_checkpoint_names_the_file_and_the_disk(
    full_disk, cli_env, tmp_path
):
    args = ["train", *TINY, "model=fixed", "train.checkpoint_every=2"]
    if full_disk is None:  # no tmpfs: a file-size limit fails the write as a full disk does
        res = run_limited([*args, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, 100_000,
                          cli_env)  # fmt: skip
        one_line_error(res, "cannot write", "last.pt")
        assert "enforce fail" not in res.stderr and "inline_container" not in res.stderr
        return
    run = full_disk / "run"
    res = subprocess.run(
        [sys.executable, "-m", "attnlab.cli", *args, f"hydra.run.dir={run}"],
        cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    one_line_error(res, f"cannot write {run / 'checkpoints' / 'last.pt'}: ")
    assert f"no space left on the disk at {full_disk} (" in res.stderr
    assert "enforce fail" not in res.stderr and "inline_container" not in res.stderr
    assert not list((run / "checkpoints").glob(".*.tmp"))  # nothing half-written is left
