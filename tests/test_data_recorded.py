"""Held-out strips checked when they are read, and fine-tuning that cannot leak (issue #41,
items 3 and 4). Two tiny runs trained here on real folders: one holding out a share of its
groups, one validating on a data.val_path; then ``attnlab eval RUN`` on held-out sets
changed after training (refused), and ``init_from`` with a held-out set that holds strips
or groups the starting weights trained on (refused). Counted strip by strip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.cli import run_cli
from helpers.groups import grouped_sources, plain_folder
from helpers.readers import tiny_config
from helpers.runs import one_line_error

from attnlab.data.dedup import KEY
from attnlab.data.sources import open_source
from attnlab.data.strip_cache import decode_all
from attnlab.errors import UserError
from attnlab.runs.rundir import RunDir
from attnlab.training.trainer import Trainer

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1", "train.steps=4"]
HELD = "eval/held-out-greedy"


def _train(root: Path, name: str, *args: str) -> Path:
    run = root / name
    reader = [] if any(a.startswith("model=") for a in args) else ["model=attention"]
    res = run_cli("train", *TINY, *reader, "data=folder", *args, f"hydra.run.dir={run}", cwd=root)
    assert res.returncode == 0, res.stderr
    return run


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("recorded")


@pytest.fixture(scope="module")
def plain_runs(root):
    """``plain``: 40 strips without groups, ``run_val`` trained on them and validated on the
    12 other strips of ``val`` (data.val_path)."""
    plain, val = plain_folder(root / "plain", 40, seed=7), plain_folder(root / "val", 12, seed=8)
    run_val = _train(root, "b", f"data.path={plain}", f"data.val_path={val}")
    return {"plain": plain, "val": val, "run_val": run_val}


@pytest.fixture(scope="module")
def runs(plain_runs, grouped_run):
    return {**plain_runs, **grouped_run}


@pytest.fixture(scope="module")
def grouped_run(root):
    """``grouped``: 40 strips in 10 groups; ``run_grouped`` holds out 20% of the groups."""
    grouped = grouped_sources(root / "grouped")["folder"]
    run = _train(root, "a", f"data.path={grouped}", "data.val_share=0.2")
    return {"grouped": grouped, "run_grouped": run}


def _keys(path: Path) -> dict[str, str]:
    """Per strip id of a source: its decoded image's key, read here independently."""
    d = tiny_config("attention").data
    cache = decode_all(open_source(path), d.height, d.crop)
    return dict(zip(cache.ids, (k[:KEY] for k in cache.keys), strict=True))


def _eval(run: Path):
    return run_cli("eval", run, "eval.maps_k=0", cwd=run.parent)


@pytest.fixture
def restore():
    """Files a test changes, put back as they were when it ends."""
    saved: dict[Path, bytes] = {}

    def keep(*paths: Path) -> None:
        for p in paths:
            saved.setdefault(p, p.read_bytes())

    yield keep
    for p, data in saved.items():
        p.write_bytes(data)


@pytest.mark.slow  # two evaluations, figures included
def test_eval_reads_only_held_out_strips_and_names_the_path_read(runs, copy_run):
    for name, trained_from, read_from in (
        ("run_grouped", runs["grouped"], runs["grouped"]),
        ("run_val", runs["plain"], runs["val"]),
    ):
        run = copy_run(runs[name], name)
        split = json.loads((run / "data_split.json").read_text())
        res = _eval(run)
        assert res.returncode == 0, res.stderr
        meta = json.loads((run / HELD / "eval.json").read_text())
        assert meta["folder"] == str(read_from.resolve())  # the path actually read
        read = pd.read_csv(run / HELD / "readings.csv", dtype=str)["source"].tolist()
        train_keys, read_keys = _keys(trained_from), _keys(read_from)
        held = set(split["held_out"]) if name == "run_grouped" else set(read_keys)
        trained = [i for i in train_keys if i not in held]  # every other strip: lengths 1-3
        assert len(read) == len(held) and set(read) == held
        trained_images = {train_keys[i] for i in trained}
        assert sum(read_keys[i] in trained_images for i in read) == 0  # strip by strip


def test_a_trained_strip_copied_into_val_path_is_refused(plain_runs, restore):
    runs = plain_runs
    val, plain = runs["val"], runs["plain"]
    restore(val / "labels.csv")
    name, label = (plain / "labels.csv").read_text().splitlines()[1].split(",")
    shutil.copyfile(plain / name, val / "copied.png")
    with open(val / "labels.csv", "a") as f:
        f.write(f"copied.png,{label}\n")
    res = _eval(runs["run_val"])
    one_line_error(res, "1 of its 13 strips", "trained on", "'copied.png'")
    assert not (runs["run_val"] / HELD).exists()  # nothing evaluated


def test_a_held_out_file_overwritten_is_refused(grouped_run, restore):
    runs = grouped_run
    folder = runs["grouped"]
    split = json.loads((runs["run_grouped"] / "data_split.json").read_text())
    held = split["held_out"][0]
    trained = next(e.id for e in open_source(folder).entries if e.id not in split["held_out"])
    restore(folder / held)
    shutil.copyfile(folder / trained, folder / held)  # a trained strip under a held-out name
    one_line_error(_eval(runs["run_grouped"]), "1 of its", "trained on", repr(held))
    from PIL import Image, ImageOps

    ImageOps.mirror(Image.open(folder / trained)).save(folder / held)  # another image
    one_line_error(_eval(runs["run_grouped"]), "held-out strips changed since training")
    assert not (runs["run_grouped"] / HELD).exists()


def _fine_tune(tmp_path, path, source, *extra):
    cfg = tiny_config("attention", "data=folder", f"data.path={path}", *extra)
    if source is not None:
        cfg.init_from = str(source)
    return Trainer(cfg, RunDir(tmp_path / "run"))


def test_fine_tuning_refuses_held_out_strips_its_source_trained_on(plain_runs, tmp_path):
    runs = plain_runs
    source = runs["run_val"]  # trained on every strip of `plain`, validated on `val`
    trained_keys = set(_keys(runs["plain"]).values())
    plan = _fine_tune(tmp_path / "plan", runs["plain"], None, "data.val_share=0.3").split
    keys = _keys(runs["plain"])
    involved = sum(keys[i] in trained_keys for i in plan["held_out"])  # strip by strip
    assert involved == len(plan["held_out"]) == 12
    with pytest.raises(UserError) as err:
        _fine_tune(tmp_path / "y", runs["plain"], source, "data.val_share=0.3")
    msg = str(err.value)
    assert "\n" not in msg and f"{involved} of this run's 12 held-out strips" in msg
    # held out what the source never trained on: accepted
    ok = _fine_tune(tmp_path / "ok", runs["plain"], source, f"data.val_path={runs['val']}")
    assert ok.state.started_from is not None


def test_fine_tuning_refuses_held_out_groups_its_source_trained_on(grouped_run, tmp_path):
    runs = grouped_run
    source = runs["run_grouped"]  # 2 of 10 groups held out (data.val_share=0.2)
    before = json.loads((source / "data_split.json").read_text())
    plan = _fine_tune(tmp_path / "plan", runs["grouped"], None, "data.val_share=0.4").split
    leaked = set(plan["held_out_groups"]) - set(before["held_out_groups"])
    group = {e.id: e.group for e in open_source(runs["grouped"]).entries}
    involved = sum(group[i] in leaked for i in plan["held_out"])  # strip by strip
    assert len(leaked) == 2 and involved == 8
    with pytest.raises(UserError) as err:
        _fine_tune(tmp_path / "y", runs["grouped"], source, "data.val_share=0.4")
    msg = str(err.value)
    assert "\n" not in msg and "2 of this run's 4 held-out groups" in msg
    assert f"as were {involved} of its 16 held-out strips" in msg
    # the source's own share and seed hold out what it held out: accepted
    ok = _fine_tune(tmp_path / "ok", runs["grouped"], source, "data.val_share=0.2")
    assert ok.split["held_out_groups"] == before["held_out_groups"]


def test_held_out_labels_are_compared_strip_by_strip_in_any_order():
    """Issue #50 item 1: a record with pairs (this version) and one with the labels' digest
    in file order only (older): reordered is the same; reordered and relabelled is not."""
    from attnlab.data.dedup import pairs_digest, split_digest
    from attnlab.data.recorded import check_recorded

    keys, labels = ["k1", "k2", "k3", "k4"], ["12", "7", "305", "7"]
    ids = ["a.png", "b.png", "c.png", "d.png"]
    new = {"held_out_keys": keys, "held_out_pairs": pairs_digest(keys, labels)}
    old = {"held_out_keys": keys, "held_out_labels": split_digest([], labels)}
    back = lambda xs: list(reversed(xs))  # noqa: E731
    for record in (new, old):
        check_recorded(record, back(keys), back(labels), back(ids), "v")  # the same strips
        relabelled = back(["12", "7", "305", "8"])  # d.png: 7 -> 8, and the file reversed
        with pytest.raises(UserError, match="labels of its held-out strips changed"):
            check_recorded(record, back(keys), relabelled, back(ids), "v")
        swapped = back(["12", "305", "7", "7"])  # two strips' labels swapped
        with pytest.raises(UserError, match="labels of its held-out strips changed"):
            check_recorded(record, back(keys), swapped, back(ids), "v")
