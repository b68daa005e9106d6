"""The ``attnlab`` command line as a user meets it, in a scratch cwd: the version and one
refusal through a real subprocess (the entry point's own exit status), the rest in this
process (``attnlab_run``, tests/helpers/cli.py: the same output and exit status, without a
fresh import of torch and Hydra per command).

Every user mistake must end with exactly one line on stderr starting ``attnlab: error:``
and exit status 2, and must leave nothing behind (no outputs/ run).
"""

from __future__ import annotations

import csv
import importlib.metadata

import pytest
import yaml
from PIL import Image

import attnlab


def assert_user_error(result, *mentions: str) -> str:
    """One non-empty stderr line starting ``attnlab: error:``, exit 2, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("attnlab: error:"), lines[0]
    for text in mentions:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def test_version(attnlab_cli, tmp_path):
    result = attnlab_cli("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"attnlab {attnlab.__version__}\n"
    # The package's own version and its installed metadata agree.
    assert importlib.metadata.version("attnlab") == attnlab.__version__


def test_the_command_ends_its_idle_sweep_workers_and_exits_without_a_last_collection(
    monkeypatch,
):
    """``attnlab`` (the installed script) is ``attnlab.cli.run``: after the command, a local
    sweep's idle loky workers are ended at once and what is left is frozen for the exit."""
    import gc
    import time

    from joblib.externals.loky import get_reusable_executor

    import attnlab.cli as cli
    from hydra_plugins.attnlab_parallel.launcher import end_idle_workers

    (script,) = importlib.metadata.entry_points(group="console_scripts", name="attnlab")
    assert script.value == "attnlab.cli:run"
    executor = get_reusable_executor(max_workers=1)
    assert executor.submit(abs, -3).result() == 3
    workers = list(executor._processes.values())
    assert workers and all(p.is_alive() for p in workers)
    # A job still running (a stopped sweep's job saving its last.pt) is not cut short.
    running = executor.submit(time.sleep, 1.5)
    end_idle_workers()
    assert running.result(timeout=30) is None and all(p.is_alive() for p in workers)
    monkeypatch.setattr(cli, "app", lambda: None)
    try:
        cli.run()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    for worker in workers:
        worker.join(10)
        assert not worker.is_alive()


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["train"],
        ["sweep"],
        ["sweep", "lengths"],
        ["eval"],
        ["read"],
        ["report"],
        ["data"],
        ["data", "preview"],
        ["data", "export"],
    ],
    ids=lambda c: " ".join(c) or "attnlab",
)
def test_help(attnlab_run, tmp_path, command):
    result = attnlab_run(*command, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    usage = next(ln for ln in result.stdout.splitlines() if ln.startswith("Usage:"))
    assert usage.split("[")[0].rstrip().endswith(" ".join(["attnlab.cli", *command])), usage
    assert not list(tmp_path.iterdir())  # help writes nothing


@pytest.mark.parametrize(
    ("override", "mentions"),
    [
        ("data.height=abc", ["data.height", "abc"]),  # wrong type
        ("data.nosuchkey=1", ["data.nosuchkey"]),  # unknown key
        ("model=nosuch", ["model/nosuch"]),  # unknown group option
        ("data.height=[1", ["[1"]),  # bad override syntax
        pytest.param(
            "model=3",
            ["model"],
            id="group-given-a-number",
        ),
    ],
)
def test_config_error_is_one_line(attnlab_run, tmp_path, override, mentions):
    result = attnlab_run("train", override, cwd=tmp_path)
    assert_user_error(result, "config", *mentions)
    assert not (tmp_path / "outputs").exists()


def test_launcher_without_multirun_is_refused(attnlab_cli, tmp_path):
    result = attnlab_cli("train", "hydra/launcher=submitit_local", cwd=tmp_path)
    assert_user_error(result, "-m", "submitit_local")
    assert not (tmp_path / "outputs").exists()


def test_error_inside_task_is_one_line(attnlab_run, tmp_path):
    result = attnlab_run("data", "preview", "preview.n=0", cwd=tmp_path)
    assert_user_error(result, "preview.n")
    assert not (tmp_path / "strips_preview.png").exists()


def test_print_config(attnlab_run, tmp_path):
    result = attnlab_run("train", "--cfg", "job", "preset=tiny", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train_lengths" in result.stdout and "name: attention" in result.stdout
    cfg = yaml.safe_load(result.stdout)
    assert cfg["data"]["train_lengths"] == [1, 3]  # from preset/tiny.yaml
    assert cfg["train"]["steps"] == 30
    assert cfg["model"]["hidden"] == 16
    assert cfg["seed"] == 0
    assert not (tmp_path / "outputs").exists()  # printing the config runs nothing
    assert not list(tmp_path.iterdir())


def _check_grid_png(path, n_rows: int) -> None:
    with Image.open(path) as im:
        assert im.format == "PNG"
        width, height = im.size
        low, high = im.convert("L").getextrema()
    # draw_grid: 0.45 in per strip + 0.6 in at 100 dpi; width 2 in + strips, at most 16 in.
    assert height == round(100 * (0.45 * n_rows + 0.6))
    assert 250 <= width <= 1600
    assert high - low > 100  # ink on paper, not a blank page


def test_data_preview(attnlab_run, tmp_path):
    result = attnlab_run(
        "data", "preview", "preview.out=p.png", "preview.n=4", "data=clean", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 4 strips to p.png" in result.stdout
    _check_grid_png(tmp_path / "p.png", 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.png"]  # no temp file, no run dir

    result = attnlab_run("data", "preview", "preview.n=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    _check_grid_png(tmp_path / "strips_preview.png", 2)  # the default name, in cwd


def test_data_export(attnlab_run, tmp_path):
    result = attnlab_run("data", "export", "out", "--n", "12", "--lengths", "2-4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) == 12
    with open(out / "labels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12
    assert sorted(r["filename"] for r in rows) == pngs
    for row in rows:
        assert row["label"].isdigit() and 2 <= len(row["label"]) <= 4, row
        with Image.open(out / row["filename"]) as im:
            assert im.size[1] == 32  # data.height
            assert im.size[0] >= 8 * len(row["label"])
    assert sorted(p.name for p in out.iterdir()) == sorted([*pngs, "labels.csv"])


def test_data_export_bad_lengths(attnlab_run, tmp_path):
    result = attnlab_run("data", "export", "out", "--n", "12", "--lengths", "4-x", cwd=tmp_path)
    assert_user_error(result, "--lengths", "4-x")
    assert not (tmp_path / "out").exists()
