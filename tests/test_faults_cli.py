"""Faults at the command line (issue #24, classes 4-9): one line where one line is promised,
and no file overwritten or changed by a refusal. The silent wrong results (classes 1-3) are in
test_faults_evaluation.py; ``checksums`` compares a whole directory before and after.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.images import png_header, strip_png
from helpers.runs import (
    TINY,
    busy_run,
    checksums,
    one_line_error,
    run_limited,
    unchanged,
)
from PIL import Image


def appended_only(root: Path, before: dict[str, str], log_before: str) -> None:
    """Nothing lost: every file as it was, except train.log, which may only grow (a refused
    command says in the run's log why it was refused)."""
    after = checksums(root)
    changed = sorted(k for k, v in before.items() if after.get(k) != v and k != "train.log")
    assert changed == [] and sorted(after) == sorted(before), (changed, sorted(after))
    assert (root / "train.log").read_text().startswith(log_before)


# --- [4] crafted or corrupt checkpoint contents ---------------------------------------------


def _crafted(d: dict, how: str) -> None:
    if how == "model=None":
        d["model"] = None
    elif how == "config=[1,2]":
        d["config"] = [1, 2]
    elif how == "config.model=[1]":
        d["config"]["model"] = [1]
    else:
        key, value = how.split("=")
        d["config"]["model"][key.rsplit(".", 1)[1]] = float(value) if "e" in value else int(value)


@pytest.mark.parametrize(
    "how, mentions",
    [
        ("model=None", "'model' entry"),
        ("config=[1,2]", "'config' entry"),
        ("config.model=[1]", "model is not a mapping"),
        ("config.model.hidden=-1", "model.hidden"),
        ("config.model.hidden=1e6", "model.hidden"),
        ("config.model.hidden=1000000", "too large"),
        ("config.model.layers=0", "model.layers"),
    ],
)
def test_a_crafted_checkpoint_is_one_line_before_any_tensor_is_built(
    how, mentions, trained, attnlab_cli, attnlab_run, tmp_path
):
    ckpt = torch.load(trained["attention"] / "checkpoints" / "best.pt", weights_only=True)
    crafted = copy.deepcopy(ckpt)
    _crafted(crafted, how)
    path = tmp_path / "x.pt"
    torch.save(crafted, path)
    before = checksums(tmp_path)
    # One case in real processes (nothing that torch writes to the stderr file descriptor
    # itself slips past the one line); the others in-process, to be quick.
    cli = attnlab_cli if how == "model=None" else attnlab_run
    one_line_error(cli("eval", path, "eval.n=2", cwd=tmp_path), mentions)
    one_line_error(cli("read", path, "--run", path, cwd=tmp_path), mentions)
    unchanged(tmp_path, before)


def test_an_absurd_model_size_is_refused_before_training(attnlab_run, tmp_path):
    run = tmp_path / "run"
    res = attnlab_run("train", *TINY, "model.hidden=100000000", f"hydra.run.dir={run}",
                      cwd=tmp_path)  # fmt: skip
    one_line_error(res, "too large", "model.hidden")


# --- [5] device names --------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["mps", "meta", "cuda:x", "CPU"])
def test_a_device_the_readme_does_not_document_is_one_line_and_writes_nothing(
    device, trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    before = checksums(run)
    one_line_error(attnlab_run("read", run / "x.png", "--run", run, "--device", device,
                               cwd=tmp_path), "device", device)  # fmt: skip
    one_line_error(attnlab_run("eval", run, f"device={device}", cwd=tmp_path), "device")
    one_line_error(attnlab_run("probe", run, f"device={device}", cwd=tmp_path), "device")
    unchanged(run, before)
    fresh = tmp_path / "fresh"
    res = attnlab_run("train", *TINY, f"train.device={device}", f"hydra.run.dir={fresh}",
                      cwd=tmp_path)  # fmt: skip
    one_line_error(res, "train.device")
    assert not (fresh / "status.json").exists() and not (fresh / ".hydra").exists()


# --- [6] reader plugins that fail to import ---------------------------------------------------

PLUGINS = {
    "p_raise": ('raise RuntimeError("boom")\n', "RuntimeError: boom"),
    "p_syntax": ("def (\n", "syntax error"),
    "p_exit": ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
    "p_taken": (
        "from attnlab.models.registry import register\n"
        "from attnlab.models.readers.attention import AttentionConfig, AttentionReader\n"
        "@register('attention', AttentionConfig, 'a second attention')\n"
        "class Again(AttentionReader):\n    pass\n",
        "already taken",
    ),
    "../etc": (None, "not a module name"),
}


@pytest.mark.parametrize("module", sorted(PLUGINS))
def test_a_plugin_that_fails_on_import_is_one_line_naming_it(module, cli_env, tmp_path):
    source, mentions = PLUGINS[module]
    if source is not None:
        (tmp_path / f"{module}.py").write_text(source)
    env = {**cli_env, "PYTHONPATH": str(tmp_path), "ATTNLAB_READERS": module}
    for args in (["readers"], ["train", *TINY, f"hydra.run.dir={tmp_path / 'r'}"]):
        res = subprocess.run([sys.executable, "-m", "attnlab.cli", *args], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        one_line_error(res, "ATTNLAB_READERS", repr(module), mentions)
    assert not (tmp_path / "r").exists()


# --- [7] FIFOs and other files that are not regular; one beam check ----------------------------


def test_read_refuses_a_fifo_and_reads_the_other_files(trained, attnlab_run, tmp_path):
    export = tmp_path / "ex"
    assert attnlab_run("data", "export", export, "--n", "2", cwd=tmp_path).returncode == 0
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    images = sorted(export.glob("*.png"))
    res = attnlab_run("read", fifo, *images, "--run", trained["attention"], cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "not a regular file" in res.stderr
    assert all(str(p) in res.stdout for p in images)
    one_line_error(attnlab_run("read", tmp_path, "--run", trained["attention"], cwd=tmp_path),
                   "not a regular file")  # fmt: skip


@pytest.mark.parametrize("beam", ["0", "-5"])
def test_read_and_eval_refuse_the_same_beams(beam, trained, attnlab_run, tmp_path):
    one_line_error(attnlab_run("read", "x.png", "--run", trained["attention"], "--beam", beam,
                               cwd=tmp_path), "--beam", "must be >= 1")  # fmt: skip
    one_line_error(attnlab_run("eval", trained["attention"], "--beam", beam, cwd=tmp_path),
                   "eval.beam", "must be >= 1")  # fmt: skip


# --- [8] every refusal is one line; nothing is written before the checks ------------------------


@pytest.mark.parametrize(
    "override, mentions",
    [
        ("seed=100000000000000000000", "seed"),
        ("seed=-1", "seed"),
        ("seed=${oc.env:HOME}", "seed"),
        ("seed=1e20", "seed"),
        ("model.stride=3", "stride"),
    ],
)
def test_a_bad_seed_or_value_is_one_line_and_leaves_no_run(
    override, mentions, attnlab_run, tmp_path
):
    run = tmp_path / "run"
    res = attnlab_run("train", *TINY, override, f"hydra.run.dir={run}", cwd=tmp_path)
    one_line_error(res, mentions)
    assert "Error executing job" not in res.stderr and "full_key" not in res.stderr
    assert not (run / "status.json").exists() and not (run / ".hydra").exists()


def test_a_bad_value_for_a_finished_run_is_one_line_and_changes_nothing(
    trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    before, log = checksums(run), (run / "train.log").read_text()
    for override in ("seed=${oc.env:HOME}", "train.device=mps", "model=fixed"):
        res = attnlab_run("train", *TINY, override, f"hydra.run.dir={run}", cwd=tmp_path)
        one_line_error(res)
    appended_only(run, before, log)


# --- [9] overwrites and half-written outputs ----------------------------------------------------


def test_a_refused_trainer_leaves_the_hydra_files_of_a_busy_run_alone(tmp_path, attnlab_run):
    run = tmp_path / "R2"
    with busy_run(run, "train.steps=100000", "train.checkpoint_every=1000", stop=signal.SIGTERM):
        hydra = {p.name: p.read_bytes() for p in (run / ".hydra").iterdir()}
        res = attnlab_run("train", *TINY, "model=fixed", "seed=5", f"hydra.run.dir={run}",
                          cwd=tmp_path)  # fmt: skip
        one_line_error(res, "in use")
        assert {p.name: p.read_bytes() for p in (run / ".hydra").iterdir()} == hydra
    # Interrupted before its first checkpoint: SIGTERM saved last.pt at the step it stopped
    # (tests/test_runs_record.py), and still a refused command changes nothing of the run.
    assert json.loads((run / "status.json").read_text())["state"] == "interrupted"
    before, log = checksums(run), (run / "train.log").read_text()
    res = attnlab_run("train", *TINY, "model=fixed", "seed=5", "train.steps=0",
                      f"hydra.run.dir={run}", cwd=tmp_path)  # fmt: skip
    one_line_error(res, "train.steps")
    appended_only(run, before, log)


def test_export_and_preview_refuse_existing_files_unless_forced(trained, attnlab_run, tmp_path):
    export = tmp_path / "ex"
    assert attnlab_run("data", "export", export, "--n", "4", cwd=tmp_path).returncode == 0
    before = checksums(export)
    one_line_error(attnlab_run("data", "export", export, "--n", "2", cwd=tmp_path),
                   "labels.csv exists", "--force")  # fmt: skip
    unchanged(export, before)
    res = attnlab_run("data", "export", export, "--n", "2", "--force", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert len((export / "labels.csv").read_text().splitlines()) == 3

    run = trained["attention"]
    before = checksums(run)
    one_line_error(attnlab_run("data", "preview", f"preview.out={run / 'metrics.json'}",
                               cwd=tmp_path), "preview.out", ".png")  # fmt: skip
    one_line_error(attnlab_run("data", "preview", "preview.out=x.txt", cwd=tmp_path), ".png")
    unchanged(run, before)
    png = tmp_path / "p.png"
    png.write_bytes(b"keep")
    one_line_error(attnlab_run("data", "preview", f"preview.out={png}", "preview.n=2",
                               cwd=tmp_path), "exists", "preview.force")  # fmt: skip
    assert png.read_bytes() == b"keep"
    res = attnlab_run("data", "preview", f"preview.out={png}", "preview.n=2",
                      "preview.force=true", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0 and png.read_bytes()[:4] == b"\x89PNG"


def test_a_report_that_fails_on_a_full_disk_leaves_the_old_report_whole(
    trained, attnlab_run, cli_env, tmp_path
):
    out = tmp_path / "O"
    res = attnlab_run("report", trained["fixed"], "--out", out, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (out / "my notes.txt").write_text("kept")
    before = checksums(out)
    res = run_limited(["report", trained["attention"], trained["fixed"], "--out", out],
                      tmp_path, 20_000, cli_env)  # fmt: skip
    one_line_error(res, "cannot write")
    unchanged(out, before)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".O.")]
    # A report that succeeds replaces the old one and keeps what is not the report's.
    res = attnlab_run("report", trained["attention"], trained["fixed"], "--out", out,
                      cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (out / "my notes.txt").read_text() == "kept"
    assert "attention" in (out / "summary.md").read_text()


def test_read_quotes_a_name_with_a_newline_and_folder_warnings_go_to_stderr(
    trained, attnlab_run, tmp_path
):
    odd = tmp_path / "two\nlines.png"
    strip_png(odd)
    res = attnlab_run("read", odd, "--run", trained["attention"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == 2 and repr(str(odd)) in res.stdout

    folder = tmp_path / "strips"
    folder.mkdir()
    strip_png(folder / "inv.png", inverted=True)
    (folder / "labels.csv").write_text("filename,label\ninv.png,12\n")
    run = tmp_path / "run"
    shutil.copytree(trained["attention"], run, ignore=shutil.ignore_patterns(".lock"))
    res = attnlab_run("eval", run, "--folder", folder, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "inverted" in res.stderr and "inverted" not in res.stdout


@pytest.fixture(scope="module")
def run(trained) -> Path:
    """The session's trained attention run (``read`` writes nothing into it)."""
    return trained["attention"]


def test_read_goes_on_past_a_bomb_and_takes_odd_paths(run, ref8, tmp_path, attnlab_run):
    odd = tmp_path / "dïgits, l'été" / "strip, n'1 ✓.png"
    odd.parent.mkdir()
    Image.fromarray(ref8).save(odd)
    Image.fromarray(255 - ref8).save(tmp_path / "neg.png")
    (tmp_path / "huge.png").write_bytes(png_header(20_000, 20_000))
    res = attnlab_run("read", odd, tmp_path / "huge.png", tmp_path / "neg.png", "--run", run,
                      cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    err = [ln for ln in res.stderr.splitlines() if ln.startswith("attnlab:")]
    assert err == [
        f"attnlab: error: {tmp_path / 'huge.png'}: image too large "
        f"(over {Image.MAX_IMAGE_PIXELS} pixels, Pillow's guard against decompression bombs): "
        "crop or downscale it",
        f"attnlab: warning: {tmp_path / 'neg.png'}: light ink on dark paper: inverted to read it",
    ]
    rows = res.stdout.splitlines()[1:]
    assert [r.split("  ")[0].strip() for r in rows] == [str(odd), str(tmp_path / "neg.png")]
    assert rows[0].split()[-2] == rows[1].split()[-2]  # the inverted copy reads the same


def test_read_gives_files_of_one_name_their_own_maps(run, ref8, tmp_path, attnlab_run):
    for sub, a in (("a", ref8), ("b", ref8[:, : ref8.shape[1] // 2])):
        (tmp_path / sub).mkdir()
        Image.fromarray(a).save(tmp_path / sub / "x.png")
    maps = tmp_path / "maps"
    images = [tmp_path / "a" / "x.png", tmp_path / "b" / "x.png", tmp_path / "a" / "x.png"]
    res = attnlab_run("read", *images, "--run", run, "--attention", maps, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stdout.splitlines() if ln.startswith("attention map of")]
    targets = ["a_x_attention.png", "b_x_attention.png", "a_x_2_attention.png"]
    assert said == [
        f"attention map of {p}: {maps / t}" for p, t in zip(images, targets, strict=True)
    ]
    assert sorted(p.name for p in maps.iterdir()) == sorted(targets)
