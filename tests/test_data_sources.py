"""Labelled strips as training data (data=folder): folder, list file and LMDB sources, the
label checks, the held-out share, resume after a kill (attnlab.data.sources, source_train)."""

from __future__ import annotations

import csv
import json

import lmdb
import pytest
import torch
from helpers.readers import tiny_config
from PIL import Image

from attnlab.data.source_stream import SourceStream
from attnlab.data.sources import open_source
from attnlab.data.split import held_out
from attnlab.data.strip_cache import decode_all
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder

TINY = ["preset=tiny", "train.progress=plain"]


@pytest.fixture(scope="module")
def fifty(tmp_path_factory):
    """The same 50 strips (lengths 1-3) as a folder, a list file and an LMDB built here
    with the lmdb package."""
    root = tmp_path_factory.mktemp("fifty")
    cfg = tiny_config("attention")
    gen = torch.Generator().manual_seed(5)
    batch = StripSynth(cfg.data).sample(torch.randint(1, 4, (50,), generator=gen), gen)
    folder = export_folder(batch, root / "folder")
    with open(folder / "labels.csv", newline="") as f:
        pairs = list(csv.reader(f))[1:]
    (folder / "train.txt").write_text("".join(f"{n}\t{label}\n" for n, label in pairs))
    env = lmdb.open(str(root / "lmdb"), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i, (name, label) in enumerate(pairs, start=1):
            txn.put(f"image-{i:09d}".encode(), (folder / name).read_bytes())
            txn.put(f"label-{i:09d}".encode(), label.encode())
        txn.put(b"num-samples", str(len(pairs)).encode())
    env.close()
    return {"folder": folder, "list": folder / "train.txt", "lmdb": root / "lmdb"}


def test_folder_list_and_lmdb_give_identical_training_tensors(fifty):
    d = tiny_config("attention").data
    batches = {}
    for kind, path in fifty.items():
        source = open_source(path)
        assert source.kind == kind and len(source) == 50
        cache = decode_all(source, d.height, d.crop)
        stream = SourceStream(cache, 16, seed=3, data=d)  # augmentation on, as in training
        batches[kind] = [stream.next() for _ in range(3)]
    for kind in ("list", "lmdb"):
        for a, b in zip(batches["folder"], batches[kind], strict=True):
            assert a.labels == b.labels
            assert torch.equal(a.widths, b.widths)
            assert torch.equal(a.images, b.images)


@pytest.mark.parametrize("prefetch", [False, True])
def test_the_stream_state_resumes_the_same_batches(fifty, prefetch):
    d = tiny_config("attention").data
    cache = decode_all(open_source(fifty["folder"]), d.height, d.crop)
    a = SourceStream(cache, 8, seed=1, data=d, prefetch=prefetch)
    a.next()
    state = a.state()
    want = [a.next() for _ in range(2)]
    b = SourceStream(cache, 8, seed=99, data=d, prefetch=prefetch)
    b.next()  # a batch already prefetched from another state is dropped
    b.load_state(state)
    for x, y in zip(want, [b.next() for _ in range(2)], strict=True):
        assert x.labels == y.labels and torch.equal(x.images, y.images)


def test_held_out_share_is_fixed_and_disjoint_from_training(tmp_path, fifty):
    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    path = fifty["folder"]
    cfg = tiny_config("attention", "data=folder", f"data.path={path}", "data.val_share=0.2")
    trainer = Trainer(cfg, RunDir(tmp_path / "run"))
    held = trainer.split["held_out"]
    entries = open_source(path).entries
    assert held == [entries[i].id for i in held_out(50, 0.2, cfg.data.eval_seed)]
    assert len(held) == 10
    trained = set(trainer.stream.cache.ids)
    assert not trained & set(held) and len(trained) + len(held) == 50
    assert sum(len(s) for s in trainer.val_sets.values()) == 10
    for _ in range(3):  # every training strip drawn comes from the training ids
        assert set(trainer.stream.next().labels) <= set(trainer.stream.cache.labels)
    assert not (tmp_path / "run" / "data_split.json").exists()  # written when training starts


def _strip(path, label_width=40, ink=True, paper=255):
    im = Image.new("L", (label_width, 32), paper)
    if ink:
        im.paste(255 - paper, (label_width // 4, 8, label_width // 2, 24))
    im.save(path)


def _faint(path):
    """4 px wide: its stroke too faint for the crop to find (it stays 4 px wide), not blank
    (a blank image is refused before its label is looked at)."""
    im = Image.new("L", (4, 32), 255)
    im.paste(250, (1, 8, 2, 24))
    im.save(path)


def _refused(attnlab_run, tmp_path, data, *extra):
    run = tmp_path / "run"
    res = attnlab_run(
        "train", *TINY, "model=attention", "data=folder", f"data.path={data}",
        f"hydra.run.dir={run}", *extra,
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if not ln.startswith("attnlab: warning:")]
    assert len(errors) == 1 and errors[0].startswith("attnlab: error:"), res.stderr
    # Nothing at all: Hydra makes the run directory, and it stays empty (no train.log, no
    # .hydra/, no status.json, no lock file, no checkpoint, history, events or split file).
    assert not run.exists() or sorted(p.name for p in run.iterdir()) == []
    return errors[0]


def _folder(tmp_path, rows):
    folder = tmp_path / "strips"
    folder.mkdir()
    for name, _ in rows:
        if name:
            _strip(folder / name)
    text = "filename,label\n" + "".join(f"{n or 'gone.png'},{label}\n" for n, label in rows)
    (folder / "labels.csv").write_text(text)
    return folder


def test_a_label_outside_the_charset_is_one_line(tmp_path, attnlab_run):
    rows = [(f"s{i}.png", "12") for i in range(8)] + [("bad.png", "1a"), ("bad2.png", "x-")]
    err = _refused(attnlab_run, tmp_path, _folder(tmp_path, rows))
    assert "2 label(s)" in err and "'-ax'" in err and "labels.csv:10" in err


def test_a_missing_image_is_one_line(tmp_path, attnlab_run):
    rows = [(f"s{i}.png", "12") for i in range(8)] + [(None, "3")]
    err = _refused(attnlab_run, tmp_path, _folder(tmp_path, rows))
    assert "labels.csv:10" in err and "gone.png" in err and "not found" in err


def test_a_refusal_after_a_warning_leaves_no_log(tmp_path, attnlab_run):
    # A light-on-dark strip is read with a warning (logged) before the label too long is
    # refused: the job log that warning opened goes with the refusal.
    folder = _folder(tmp_path, [(f"s{i}.png", "12") for i in range(10)])
    _strip(folder / "dark.png", paper=0)
    _faint(folder / "narrow.png")
    with open(folder / "labels.csv", "a") as f:
        f.write("dark.png,12\nnarrow.png,123\n")
    err = _refused(attnlab_run, tmp_path, folder, f"data.val_path={folder}")
    assert "1 label(s) too long" in err and "labels.csv:13" in err


def test_a_label_too_long_is_refused_or_skipped(tmp_path, attnlab_run):
    folder = _folder(tmp_path, [(f"s{i}.png", "12") for i in range(10)])
    for i in range(10):  # ten distinct inks (identical strips would count once)
        _strip(folder / f"s{i}.png", label_width=40 + 4 * i)
    _faint(folder / "narrow.png")  # 4 px: 2 columns at stride 2
    with open(folder / "labels.csv", "a") as f:
        f.write("narrow.png,123\n")
    other = tmp_path / "other"
    other.mkdir()
    _strip(other / "v.png", label_width=90)
    (other / "labels.csv").write_text("filename,label\nv.png,12\n")
    val = f"data.val_path={other}"  # validation from elsewhere: every strip trains
    err = _refused(attnlab_run, tmp_path, folder, val)
    assert "1 label(s) too long" in err and "labels.csv:12" in err and "data.skip_long" in err

    run = tmp_path / "skipping"
    res = attnlab_run(
        "train", *TINY, "model=attention", "data=folder", f"data.path={folder}", val,
        "data.skip_long=true",
        "train.steps=2", f"hydra.run.dir={run}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    split = json.loads((run / "data_split.json").read_text())
    assert split["skipped_long"] == 1 and split["trained"] == 10 and split["held_out"] == []
    assert "1 skipped as too long" in (run / "train.log").read_text()


def test_a_folder_run_resumes_bit_identically_after_a_kill(
    tmp_path, attnlab_run, killed_and_resumed, fifty
):
    args = [
        *TINY, "data=folder", f"data.path={fifty['lmdb']}", "data.mix=0.25",
        "train.steps=60", "train.checkpoint_every=10", "train.val_every=20",
    ]  # fmt: skip
    whole, cut, killed_at = killed_and_resumed(args, tmp_path)
    assert 0 < killed_at < 60
    assert f"at step {killed_at}" in (cut / "train.log").read_text()
    split = [
        torch.load(r / "checkpoints/last.pt", weights_only=True)["data_split"] for r in (whole, cut)
    ]
    assert split[0] == split[1]

    # attnlab eval RUN: the held-out strips, per length, by default.
    res = attnlab_run("eval", whole, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta = json.loads((whole / "eval" / "held-out-greedy" / "eval.json").read_text())
    readings = (whole / "eval" / "held-out-greedy" / "readings.csv").read_text()
    assert meta["source"] == "folder"
    held = split[0]["held_out"]
    assert sum(f"image-{i:09d}" in readings for i in range(1, 51)) == len(held)


@pytest.mark.slow
def test_fine_tuning_on_another_charset_maps_the_output_layer_by_character(tmp_path, fifty):
    from attnlab.errors import UserError
    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    src = tmp_path / "source"
    Trainer(tiny_config("attention", "train.steps=2"), RunDir(src)).run()
    before = torch.load(src / "checkpoints" / "best.pt", weights_only=True)["model"]
    args = ("data=folder", f"data.path={fifty['folder']}", "data.charset=0123456789AB")
    tuned = Trainer(tiny_config("attention", *args, f"init_from={src}"), RunDir(tmp_path / "t"))
    fresh = set(tuned.state.started_from["mapped_by_character"])
    after = tuned.model.state_dict()
    # The layers sized by the vocabulary (13 -> 15 tokens; the CTC head's classes when it has
    # one), no other, are mapped by character: the output layer and the token embedding; the
    # rows of A and B (the last two) are new (tests/test_runs_record.py checks the rows).
    aux = {k for k in after if k.startswith("ctc_head.")}
    assert fresh == {"out.weight", "out.bias", "embed.weight"} | aux
    assert (
        tuned.state.started_from["reinitialised"] == []
        and tuned.state.started_from["new_characters"] == "AB"
    )
    for key, value in after.items():
        if key not in fresh:
            assert torch.equal(value, before[key]), key
        elif not key.startswith("ctc_head."):  # the CTC head's blank is its last row
            assert torch.equal(value[:-2], before[key]), key
    assert after["out.weight"].shape[0] == before["out.weight"].shape[0] + 2
    assert tuned.checkpoint().init_from["path"] == str((src / "checkpoints" / "best.pt").resolve())

    with pytest.raises(UserError, match=r"model\.hidden=8 but the source run's is 16"):
        Trainer(
            tiny_config("attention", "model.hidden=8", f"init_from={src}"), RunDir(tmp_path / "x")
        )


@pytest.mark.slow
def test_a_charset_no_font_has_trains_on_labelled_strips_alone(tmp_path, attnlab_run, fifty):
    # data.mix=0 draws no synthetic strip: the generator's fonts need not have the charset.
    charset = "data.charset='0123456789\U000f0001'"
    args = [*TINY, "data=folder", f"data.path={fifty['folder']}", charset, "train.steps=2"]
    run = tmp_path / "alone"
    res = attnlab_run("train", *args, f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (run / "checkpoints" / "last.pt").is_file()
    # With synthetic strips in the batches (data.mix), it is refused before anything.
    err = _refused(attnlab_run, tmp_path, fifty["folder"], charset, "data.mix=0.25")
    assert "U+F0001" in err


def test_export_as_lmdb_reads_back_as_the_folder_export(tmp_path, attnlab_run):
    for fmt in ("folder", "lmdb"):
        res = attnlab_run(
            "data", "export", tmp_path / fmt, "--n", "12", "--format", fmt, cwd=tmp_path
        )
        assert res.returncode == 0, res.stderr
    a, b = (open_source(tmp_path / fmt) for fmt in ("folder", "lmdb"))
    assert (a.kind, b.kind) == ("folder", "lmdb") and [e.label for e in a.entries] == [
        e.label for e in b.entries
    ]
    ca, cb = decode_all(a, 32, True), decode_all(b, 32, True)
    assert all(torch.equal(x, y) for x, y in zip(ca.images, cb.images, strict=True))
    assert not list(tmp_path.glob(".*partial"))


def _dot(h: int = 32, w: int = 64, at: tuple[int, int] = (16, 30)) -> torch.Tensor:
    ink = torch.zeros(1, h, w)
    ink[0, at[0] - 1 : at[0] + 2, at[1] - 1 : at[1] + 2] = 1.0  # a 3 x 3 blot
    return ink


def _centre(ink: torch.Tensor) -> torch.Tensor:
    ys, xs = torch.meshgrid(torch.arange(ink.shape[0]), torch.arange(ink.shape[1]), indexing="ij")
    m = ink.sum()
    return torch.stack([(ink * ys).sum() / m, (ink * xs).sum() / m])


@pytest.mark.parametrize("elastic", [0.5, 1.5, 3.0])
def test_the_elastic_warp_of_real_strips_moves_ink_at_most_elastic_px(elastic):
    from attnlab.data.augment import warp

    moved = []
    for seed in range(40):
        out = warp(_dot().clone(), elastic, torch.Generator().manual_seed(seed))[0]
        shift = _centre(out) - torch.tensor([16.0, 30.0])
        assert float(shift.abs().max()) <= elastic + 0.05, (seed, shift)
        assert 0.4 * 9 < float(out.sum()) < 2.0 * 9  # the blot kept (bent: squeezed or spread)
        moved.append(float(shift.abs().max()))
    assert max(moved) > 0.4 * elastic  # it does move ink, in x as well as y
    xs = [float((_centre(warp(_dot().clone(), elastic, torch.Generator().manual_seed(s))[0])
                 - torch.tensor([16.0, 30.0]))[1].abs()) for s in range(40)]  # fmt: skip
    assert max(xs) > 0.3 * elastic


@pytest.mark.parametrize("amount", [0.1, 0.25, 0.5])
def test_the_slant_of_real_strips_shears_each_strip_within_amount_and_keeps_its_rows(amount):
    from attnlab.data.augment import slant

    h, w, x0 = 32, 64, 30
    bar = torch.zeros(1, h, w)
    bar[0, 4:28, x0] = 1.0  # an upright stroke
    slopes = []
    for seed in range(40):
        out = slant(bar.clone(), amount, torch.Generator().manual_seed(seed))[0]
        assert torch.allclose(out.sum(1), bar[0].sum(1), atol=1e-4)  # rows keep their ink
        rows = torch.arange(4, 28)
        xs = torch.stack([_centre(out[r : r + 1])[1] for r in rows])
        slope = float(-(xs[-1] - xs[0]) / (rows[-1] - rows[0]))  # the drawn shear
        assert abs(slope) <= amount + 1e-3, (seed, slope)
        line = x0 - slope * (rows.float() - (h - 1) / 2)  # a straight lean about the middle
        assert torch.allclose(xs, line, atol=1e-3), seed
        slopes.append(slope)
    assert max(slopes) > 0.6 * amount and min(slopes) < -0.6 * amount  # leans both ways


@pytest.mark.parametrize("key, value", [("elastic", 2.0), ("slant", 0.3)])
def test_the_real_strips_bend_and_slant_are_drawn_only_when_on_and_are_seeded(fifty, key, value):
    """data.elastic=0 and data.slant=0 leave every batch of a folder stream as it was (no
    draw is added); on, the batches change and repeat for a seed; padded columns stay paper."""
    d = tiny_config("attention").data

    def replace(data, **keys):
        out = data.copy()
        for k, v in keys.items():
            setattr(out, k, v)
        return out

    cache = decode_all(open_source(fifty["folder"]), d.height, d.crop)

    def batches(data):
        s = SourceStream(cache, 16, seed=3, data=data)
        return [s.next() for _ in range(3)]

    plain, off = batches(d), batches(replace(d, **{key: 0.0}))
    on, again = batches(replace(d, **{key: value})), batches(replace(d, **{key: value}))
    for a, b in zip(plain, off, strict=True):
        assert torch.equal(a.images, b.images)
    assert any(not torch.equal(a.images, b.images) for a, b in zip(plain, on, strict=True))
    for a, b in zip(on, again, strict=True):
        assert torch.equal(a.images, b.images) and a.labels == b.labels
        outside = torch.arange(a.images.shape[-1])[None] >= a.widths[:, None]  # (B, W)
        assert bool((a.images.permute(1, 0, 2)[:, outside] == 1.0).all())
