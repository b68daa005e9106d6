"""Held out by group (issue #45): a group column in labels.csv, a third tab field in list
files and ``group-%09d`` records in an LMDB; whole groups held out, data.limit drawing from
training groups only, duplicates following their group, a data.val_path sharing a group
refused. Real files; the split is made by the trainer as a run makes it (no training)."""

from __future__ import annotations

import shutil

import pytest
from helpers.groups import grouped_sources, plain_folder
from helpers.readers import tiny_config

from attnlab.data.sources import open_source
from attnlab.errors import UserError
from attnlab.runs.rundir import RunDir
from attnlab.training.trainer import Trainer


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return grouped_sources(tmp_path_factory.mktemp("grouped"))


def _trainer(tmp_path, path, *extra):
    cfg = tiny_config("attention", "data=folder", f"data.path={path}", *extra)
    return Trainer(cfg, RunDir(tmp_path / "run"))


def _groups(path):
    """Per strip id of a source: its group, as the source lists it."""
    return {e.id: e.group for e in open_source(path).entries}


def _labels(path):
    return {e.id: e.label for e in open_source(path).entries}


def test_groups_are_held_out_whole_in_every_source(tmp_path, sources):
    same = {}
    for kind, path in sources.items():  # labels.csv, a list file, an LMDB
        trainer = _trainer(tmp_path / kind, path, "data.val_share=0.3")
        split, group = trainer.split, _groups(path)
        held = set(split["held_out_groups"])
        assert len(held) == 3 and split["groups"] == 10  # 30% of the 10 groups, not of strips
        # strip by strip: every strip of a held-out group is held out, no other strip is
        assert sorted(split["held_out"]) == sorted(i for i, g in group.items() if g in held)
        trained = trainer.stream.cache.ids
        assert len(trained) == 40 - len(split["held_out"])
        assert not [i for i in trained if group[i] in held]
        assert sorted(split["trained_groups"]) == sorted(set(group.values()) - held)
        labels = _labels(path)
        same[kind] = (split["held_out_groups"], [labels[i] for i in split["held_out"]])
    assert same["folder"] == same["list"] == same["lmdb"]


def test_without_groups_every_strip_is_its_own_group(tmp_path):
    from attnlab.data.split import held_out

    path = plain_folder(tmp_path / "plain", 40, seed=7)
    trainer = _trainer(tmp_path, path, "data.val_share=0.25")
    split, seed = trainer.split, trainer.cfg.data.eval_seed
    ids = [e.id for e in open_source(path).entries]
    assert split["held_out"] == [ids[i] for i in held_out(40, 0.25, seed)]  # the draw of old
    assert split["held_out_groups"] is None and split["groups"] is None


def test_data_limit_never_draws_a_held_out_group(tmp_path, sources):
    group = _groups(sources["folder"])
    for limit in (5, 12, 28):  # 28: every training strip (the pool of 7 groups of 4)
        split = _trainer(
            tmp_path / str(limit), sources["folder"], "data.val_share=0.3", f"data.limit={limit}"
        ).split
        held = set(split["held_out_groups"])
        assert len(split["drawn_ids"]) == limit
        assert not [i for i in split["drawn_ids"] if group[i] in held]
    with pytest.raises(UserError, match="data.limit=29: .* has 28 training strips"):
        _trainer(tmp_path / "over", sources["folder"], "data.val_share=0.3", "data.limit=29")


def test_a_val_path_sharing_a_group_is_refused(tmp_path, sources):
    val = grouped_sources(tmp_path / "val", n=12, groups=3, seed=8, prefix="v")["folder"]
    got = _trainer(tmp_path / "ok", sources["folder"], f"data.val_path={val}").split
    assert got["held_out_groups"] == [] and got["val_groups"] == ["v00", "v01", "v02"]
    text = (val / "labels.csv").read_text().replace(",v01\n", ",g04\n")  # other strips, g04
    (val / "labels.csv").write_text(text)
    with pytest.raises(UserError) as err:
        _trainer(tmp_path / "no", sources["folder"], f"data.val_path={val}")
    msg = str(err.value)
    assert "\n" not in msg and "1 of its groups" in msg and "'g04'" in msg


def test_a_duplicate_follows_its_group_and_in_two_groups_is_refused(tmp_path, sources):
    folder = tmp_path / "dup"
    shutil.copytree(sources["folder"], folder)
    rows = (folder / "labels.csv").read_text().splitlines()
    name, label, group = rows[1].split(",")  # strip 0, in g00
    shutil.copyfile(folder / name, folder / "copy.png")
    (folder / "labels.csv").write_text("\n".join([*rows, f"copy.png,{label},{group}"]) + "\n")
    split = _trainer(tmp_path / "a", folder, "data.val_share=0.3").split
    held = group in split["held_out_groups"]
    assert split["merged"] == 1
    assert (split["held_out_copies"] == ["copy.png"]) == held  # the copy goes with g00
    (folder / "labels.csv").write_text("\n".join([*rows, f"copy.png,{label},g05"]) + "\n")
    with pytest.raises(UserError) as err:
        _trainer(tmp_path / "b", folder, "data.val_share=0.3")
    msg = str(err.value)
    assert "\n" not in msg and "labels.csv:42" in msg and "'g05'" in msg and "'g00'" in msg


def test_some_strips_without_a_group_are_refused(tmp_path, sources):
    folder = tmp_path / "mixed"
    shutil.copytree(sources["folder"], folder)
    lines = (folder / "list.txt").read_text().splitlines()
    lines[3] = lines[3].rsplit("\t", 1)[0]  # line 4 loses its group
    (folder / "list.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=r"list.txt:4: no group, but 39 of the 40 strips"):
        _trainer(tmp_path, folder / "list.txt", "data.val_share=0.3")


def test_resuming_on_a_changed_val_path_is_refused(tmp_path, sources):
    from attnlab.data.split_record import split_changes

    val = grouped_sources(tmp_path / "val", n=12, groups=3, seed=8, prefix="v")["folder"]
    args = (f"data.val_path={val}",)
    before = _trainer(tmp_path / "a", sources["folder"], *args).split
    assert split_changes(before, _trainer(tmp_path / "b", sources["folder"], *args).split) is None
    rows = (val / "labels.csv").read_text().splitlines()
    name = rows[1].split(",")[0]
    shutil.copyfile(val / rows[2].split(",")[0], val / name)  # one file replaced by another
    after = _trainer(tmp_path / "c", sources["folder"], *args).split
    assert split_changes(before, after) == f"{val} has other held-out strips (images) than it had"


# -- issue #50: group names normalised, one file in two groups, the share held out ----------


def _with_groups(folder, names):
    """``folder``'s labels.csv with strip i in group ``names[i]``."""
    rows = [r.split(",")[:2] for r in (folder / "labels.csv").read_text().splitlines()[1:]]
    lines = [f"{f},{label},{g}" for (f, label), g in zip(rows, names, strict=True)]
    (folder / "labels.csv").write_text("filename,label,group\n" + "\n".join(lines) + "\n")
    return folder


def test_group_names_are_read_in_nfc_in_every_source(tmp_path, sources):
    import unicodedata

    import lmdb

    nfc, nfd = "José", unicodedata.normalize("NFD", "José")
    assert nfc != nfd
    train = _with_groups(plain_folder(tmp_path / "t", 20, seed=3), [nfc, "Ana"] * 10)
    val = _with_groups(plain_folder(tmp_path / "v", 12, seed=4), [nfd, "Eve", "Bo"] * 4)
    assert {e.group for e in open_source(val).entries} == {nfc, "Eve", "Bo"}
    with pytest.raises(UserError) as err:  # one writer on both sides, typed two ways
        _trainer(tmp_path / "run", train, f"data.val_path={val}")
    assert "\n" not in str(err.value) and "1 of its groups are groups of data.path" in str(
        err.value
    )
    lines = (sources["folder"] / "list.txt").read_text().splitlines()
    (tmp_path / "list.txt").write_text(f"{lines[0].rsplit(chr(9), 1)[0]}\t{nfd}\n")
    shutil.copyfile(sources["folder"] / lines[0].split("\t")[0], tmp_path / lines[0].split("\t")[0])
    assert [e.group for e in open_source(tmp_path / "list.txt").entries] == [nfc]
    lm = tmp_path / "lm"
    shutil.copytree(sources["lmdb"], lm)
    env = lmdb.open(str(lm), map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(b"group-000000002", nfd.encode())
    env.close()
    assert open_source(lm).entries[1].group == nfc


def test_a_group_that_is_not_utf8_in_an_lmdb_is_refused(tmp_path, sources):
    import lmdb

    lm = tmp_path / "lm"
    shutil.copytree(sources["lmdb"], lm)
    env = lmdb.open(str(lm), map_size=1 << 26)
    with env.begin(write=True) as txn:  # two groups that "replace" would read as one
        txn.put(b"group-000000003", b"g\xff")
        txn.put(b"group-000000004", b"g\xfe")
    env.close()
    with pytest.raises(UserError) as err:
        open_source(lm)
    assert str(err.value) == (
        f"{lm}:group-000000003: not UTF-8 text (byte 0xff at 1): write group names as UTF-8"
    )


def test_one_file_listed_in_two_groups_is_refused(tmp_path, sources):
    folder = tmp_path / "twice"
    shutil.copytree(sources["folder"], folder)
    rows = (folder / "labels.csv").read_text().splitlines()
    name, label, group = rows[1].split(",")  # strip 0, in g00, on line 2
    again = [*rows, f"{name},{label},g05"]  # the same file and label, another group
    (folder / "labels.csv").write_text("\n".join(again) + "\n")
    with pytest.raises(UserError) as err:
        open_source(folder)
    assert str(err.value) == (
        f"{folder / 'labels.csv'}:42: {name!r} is in group 'g05' here but group {group!r} on "
        f"line 2; a strip belongs to one group: drop one of the lines"
    )
    (folder / "labels.csv").write_text("\n".join([*rows, f"{name},{label},{group}"]) + "\n")
    assert len(open_source(folder)) == 40  # in one group twice: counted once, as before
    with open(folder / "list.txt", "a") as f:  # a list file: the same file, found by content
        f.write(f"{name}\t{label}\tg05\n")
    with pytest.raises(UserError, match=r"list.txt:41: the same strip .* 'g05' here but 'g00'"):
        _trainer(tmp_path, folder / "list.txt", "data.val_share=0.3")


def test_a_held_out_share_far_from_the_one_asked_for_is_said(tmp_path, sources, caplog):
    uneven = plain_folder(tmp_path / "uneven", 40, seed=7)
    _with_groups(uneven, ["big"] * 31 + [f"s{i}" for i in range(9)])  # 31 strips, 9 of 1
    split = _trainer(tmp_path / "a", uneven, "data.val_share=0.1").split
    held = len(split["held_out"])
    assert len(split["held_out_groups"]) == 1 and held in (1, 31)  # 1 of 10 groups
    said = [r.getMessage() for r in caplog.records if "val_share" in r.getMessage()]
    pct = f"{100 * held / 40:.1f}%"
    assert len(said) == 1 and f"holds out {held} of 40 strips ({pct}), not about 10%" in said[0]
    caplog.clear()
    split = _trainer(tmp_path / "b", sources["folder"], "data.val_share=0.3").split
    assert len(split["held_out"]) == 12  # 3 of 10 groups of 4: the share asked for
    assert not [r for r in caplog.records if "val_share" in r.getMessage()]
