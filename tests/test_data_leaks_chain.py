"""What trains is never tested (issue #50, items 1, 2 and 10): a chain of three real
fine-tunes at preset=tiny (A from scratch; B from A, C from B, D from C), each on a real
folder, then held-out sets and ``eval --folder`` folders holding strips that some link of
the chain trained on. Each refusal is counted strip by strip against the strips A, B, C
and D trained on, read here independently of the runs' records."""

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

pytestmark = pytest.mark.slow  # four tiny trainings

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1", "train.steps=4"]
HELD = "eval/held-out-greedy"


def _train(root: Path, name: str, *args: str) -> Path:
    run = root / name
    reader = [] if any(a.startswith("model=") for a in args) else ["model=attention"]
    res = run_cli("train", *TINY, *reader, "data=folder", *args, f"hydra.run.dir={run}", cwd=root)
    assert res.returncode == 0, res.stderr
    return run


def _keys(path: Path) -> dict[str, str]:
    """Per strip id of a source: its decoded image's key (16 hex digits, as runs keep it),
    read here independently."""
    d = tiny_config("attention").data
    cache = decode_all(open_source(path), d.height, d.crop)
    return dict(zip(cache.ids, (k[:KEY] for k in cache.keys), strict=True))


def _plain_copy(folder: Path, dest: Path, rows: slice = slice(None)) -> Path:
    """``folder``'s strips (``rows`` of them) as a folder without a group column."""
    dest.mkdir(parents=True)
    lines = (folder / "labels.csv").read_text().splitlines()[1:][rows]
    out = ["filename,label"]
    for line in lines:
        name, label = line.split(",")[:2]
        shutil.copyfile(folder / name, dest / name)
        out.append(f"{name},{label}")
    (dest / "labels.csv").write_text("\n".join(out) + "\n")
    return dest


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """A trained on ``ga`` (40 strips in 10 groups), B fine-tuned from A on ``pb``, C from B
    on ``pc``, D from C on ``pb`` again; each validated on ``v``, which none trained on."""
    root = tmp_path_factory.mktemp("chain")
    ga = grouped_sources(root / "ga")["folder"]
    pb, pc = plain_folder(root / "pb", 40, seed=9), plain_folder(root / "pc", 40, seed=11)
    v = plain_folder(root / "v", 12, seed=8)
    val = f"data.val_path={v}"
    a = _train(root, "A", f"data.path={ga}", val)
    b = _train(root, "B", f"data.path={pb}", val, f"init_from={a}")
    c = _train(root, "C", f"data.path={pc}", val, f"init_from={b}")
    d = _train(root, "D", f"data.path={pb}", val, f"init_from={c}")
    return {"root": root, "ga": ga, "pb": pb, "pc": pc, "v": v, "A": a, "B": b, "C": c, "D": d}


def _fine_tune(tmp_path: Path, path: Path, source: Path, *extra: str) -> Trainer:
    """The trainer of a run started from ``source``: its checks run, nothing is trained."""
    cfg = tiny_config("attention", "data=folder", f"data.path={path}", *extra)
    cfg.init_from = str(source)
    return Trainer(cfg, RunDir(tmp_path / "run"))


def _trained(chain) -> dict[str, set[str]]:
    """Per run of the chain: the keys of the strips it trained on, from the folders (every
    strip of its data.path: each validated on data.val_path)."""
    ga, pb, pc = (set(_keys(chain[k]).values()) for k in ("ga", "pb", "pc"))
    return {"A": ga, "B": pb, "C": pc, "D": pb}


def test_the_chain_carries_what_every_ancestor_trained_on(chain):
    from attnlab.runs import checkpoint

    trained = _trained(chain)
    ckpt = checkpoint.load(chain["D"] / "checkpoints" / "best.pt")
    carried = ckpt.init_from["trained_on"]  # C's own record, then B's, then A's
    assert [Path(r["checkpoint"]).parent.parent.name for r in carried] == ["C", "B", "A"]
    for record, name in zip(carried, "CBA", strict=True):
        assert set(record["trained_keys"]) == trained[name] and len(trained[name]) == 40
    assert sorted(carried[2]["trained_groups"]) == [f"g{i:02d}" for i in range(10)]


def test_a_held_out_set_an_ancestor_trained_on_is_refused_through_the_chain(chain, tmp_path):
    held = _plain_copy(chain["ga"], tmp_path / "a-strips")  # A's 40 strips, no groups
    keys = _keys(held)
    a_trained = _trained(chain)["A"]
    involved = sum(k in a_trained for k in keys.values())  # strip by strip
    assert involved == len(keys) == 40
    for start in ("A", "B", "C", "D"):  # directly, and one, two and three links down
        with pytest.raises(UserError) as err:
            _fine_tune(tmp_path / start, chain["pc"], chain[start], f"data.val_path={held}")
        msg = str(err.value)
        assert "\n" not in msg and f"{involved} of this run's 40 held-out strips were" in msg
        a_ckpt = str((chain["A"] / "checkpoints" / "best.pt").resolve())
        assert ("the source checkpoint" if start == "A" else a_ckpt) in msg
    # the same chain end with strips none of them trained on: accepted
    fresh = plain_folder(tmp_path / "fresh", 12, seed=21)
    assert not set(_keys(fresh).values()) & set().union(*_trained(chain).values())
    ok = _fine_tune(tmp_path / "ok", chain["pc"], chain["D"], f"data.val_path={fresh}")
    assert len(ok.state.started_from["trained_on"]) == 4  # D's record, then C's, B's and A's


def test_a_group_an_ancestor_trained_on_is_refused_through_the_chain(chain, tmp_path):
    other = grouped_sources(tmp_path / "other", n=12, groups=3, seed=31, prefix="g")["folder"]
    assert not set(_keys(other).values()) & _trained(chain)["A"]  # other strips, A's groups
    with pytest.raises(UserError) as err:
        _fine_tune(tmp_path / "y", chain["pc"], chain["D"], f"data.val_path={other}")
    msg = str(err.value)
    assert "\n" not in msg and "3 of this run's 3 held-out groups (first 'g00') were" in msg
    assert "through other strips of theirs (none of its 12 held-out strips)" in msg
    with pytest.raises(UserError, match="and 40 of its 40|as were 40 of its 40"):
        _fine_tune(tmp_path / "z", chain["pc"], chain["D"], f"data.val_path={chain['ga']}")


def test_eval_folder_refuses_strips_the_weights_were_trained_on(chain, tmp_path):
    trained = set().union(*_trained(chain).values())
    mixed = _plain_copy(chain["v"], tmp_path / "mixed")  # V's 12 strips, never trained on
    rows = (chain["ga"] / "labels.csv").read_text().splitlines()[1:6]  # and 5 of A's
    with open(mixed / "labels.csv", "a") as f:
        for name, label, _ in (r.split(",") for r in rows):
            shutil.copyfile(chain["ga"] / name, mixed / f"a_{name}")
            f.write(f"a_{name},{label}\n")
    keys = _keys(mixed)
    involved = sum(k in trained for k in keys.values())  # strip by strip
    assert involved == 5 and len(keys) == 17
    for run in ("D", "A"):  # an ancestor's strips, and the run's own
        res = run_cli("eval", chain[run], "--folder", mixed, "eval.maps_k=0", cwd=tmp_path)
        one_line_error(res, f"{involved} of its 17 strips were trained on", "'a_")
    res = run_cli("eval", chain["D"], "--folder", chain["pb"], "eval.maps_k=0", cwd=tmp_path)
    one_line_error(res, "40 of its 40 strips were trained on")  # D's (and B's) own
    assert not (chain["D"] / "eval").exists() and not (chain["A"] / "eval").exists()


def test_eval_folder_reads_strips_never_trained_on(chain, tmp_path, copy_run):
    run = copy_run(chain["D"], "D")
    res = run_cli("eval", run, "--folder", chain["v"], "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (got,) = (run / "eval").glob("folder-v-*")
    assert json.loads((got / "eval.json").read_text())["folder"] == str(chain["v"])
    read = pd.read_csv(got / "readings.csv", dtype=str)["source"].tolist()
    assert sorted(read) == sorted(_keys(chain["v"]))  # its 12 strips, none trained on


@pytest.fixture
def restore():
    saved: dict[Path, bytes] = {}

    def keep(*paths: Path) -> None:
        for p in paths:
            saved.setdefault(p, p.read_bytes())

    yield keep
    for p, data in saved.items():
        p.write_bytes(data)


def test_a_relabelled_held_out_strip_is_refused_in_any_order(chain, restore, copy_run):
    labels = chain["v"] / "labels.csv"
    restore(labels)
    head, *rows = labels.read_text().splitlines()
    labels.write_text("\n".join([head, *reversed(rows)]) + "\n")  # reordered only: the same
    run = copy_run(chain["D"], "D")
    res = run_cli("eval", run, "eval.maps_k=0", cwd=run.parent)
    assert res.returncode == 0, res.stderr
    read = pd.read_csv(run / HELD / "readings.csv", dtype=str)["source"].tolist()
    assert sorted(read) == sorted(r.split(",")[0] for r in rows) and len(read) == 12
    name, label = rows[3].split(",")
    rows[3] = f"{name},{'1' if label != '1' else '2'}"  # one strip relabelled ...
    labels.write_text("\n".join([head, *reversed(rows)]) + "\n")  # ... and the file reversed
    shutil.rmtree(run / HELD)
    res = run_cli("eval", run, "eval.maps_k=0", cwd=run.parent)
    one_line_error(res, "labels of its held-out strips changed since training")
    assert not (run / HELD).exists()


def test_an_ancestors_strip_copied_into_the_held_out_set_is_refused(chain, restore):
    labels = chain["v"] / "labels.csv"
    restore(labels)
    name, label, _ = (chain["ga"] / "labels.csv").read_text().splitlines()[1].split(",")
    shutil.copyfile(chain["ga"] / name, chain["v"] / "from_a.png")  # A trained on it
    with open(labels, "a") as f:
        f.write(f"from_a.png,{label}\n")
    try:
        res = run_cli("eval", chain["D"], "eval.maps_k=0", cwd=chain["root"])
        one_line_error(res, "1 of its 13 strips", "trained on", "'from_a.png'")
    finally:
        (chain["v"] / "from_a.png").unlink()
    assert not (chain["D"] / HELD).exists()
