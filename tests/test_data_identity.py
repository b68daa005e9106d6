"""A strip is one strip however it is read (issue #57, item 3): its identity is its decoded
image as the file stores it (``dedup.content_key``), never its pixels after attnlab's reading
steps. Real folders of PNGs and real commands at preset=tiny: A trains on ``p`` (read with
``data.crop=true``, the default); a run started from A that reads ``p``, or a losslessly
re-encoded copy of it, with ``data.crop=false`` cannot hold it out, and ``attnlab eval
--folder`` refuses it whatever crop either reads with. A record of an older attnlab (keys
of strips as read) is still checked, with keys computed that way."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.groups import plain_folder
from helpers.runs import one_line_error
from PIL import Image

from attnlab.data import pixels
from attnlab.data.dedup import KEY, KEYS, content_key, image_key
from attnlab.data.lineage import TrainedKeys
from attnlab.data.recorded import folder_cache, legacy_keys
from attnlab.data.sources import open_source
from attnlab.data.strip_cache import decode_all
from attnlab.errors import UserError
from attnlab.runs import checkpoint
from attnlab.training.finetune import check_leak

pytestmark = pytest.mark.slow  # three tiny trainings

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1", "train.steps=4"]


def _train(root: Path, name: str, *args: str):
    return run_cli(
        "train", *TINY, "model=attention", "data=folder", *args, f"hydra.run.dir={root / name}",
        cwd=root,
    )  # fmt: skip


def _as_bmp(folder: Path, dest: Path) -> Path:
    """``folder``'s strips re-encoded as BMP files (lossless: the same decoded image)."""
    dest.mkdir()
    rows = ["filename,label"]
    for line in (folder / "labels.csv").read_text().splitlines()[1:]:
        name, label = line.split(",")[:2]
        bmp = Path(name).with_suffix(".bmp").name
        Image.open(folder / name).save(dest / bmp)
        rows.append(f"{bmp},{label}")
    (dest / "labels.csv").write_text("\n".join(rows) + "\n")
    return dest


def _content(folder: Path) -> set[str]:
    """The content keys of a folder's strips, read here from the files with Pillow alone."""
    names = [r.split(",")[0] for r in (folder / "labels.csv").read_text().splitlines()[1:]]
    return {content_key(pixels.decode(folder / n))[:KEY] for n in names}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A: trained on ``p`` (40 strips, read with the crop), validated on ``v``; ``bmp``:
    ``p`` re-encoded as BMP files."""
    root = tmp_path_factory.mktemp("identity")
    p, q = plain_folder(root / "p", 40, seed=7), plain_folder(root / "q", 40, seed=9)
    v = plain_folder(root / "v", 12, seed=8)
    a = _train(root, "A", f"data.path={p}", f"data.val_path={v}")
    assert a.returncode == 0, a.stderr
    bmp = _as_bmp(p, root / "bmp")
    return {"root": root, "p": p, "q": q, "v": v, "bmp": bmp, "A": root / "A"}


@pytest.fixture(scope="module")
def fine_tuned(runs):
    """B: fine-tuned from A on ``q`` with data.crop=false, validated on ``v``."""
    root = runs["root"]
    b = _train(
        root, "B", f"data.path={runs['q']}", f"data.val_path={runs['v']}",
        f"init_from={runs['A']}", "data.crop=false",
    )  # fmt: skip
    assert b.returncode == 0, b.stderr
    return root / "B"


def test_records_hold_content_keys(runs):
    split = checkpoint.load(runs["A"] / "checkpoints" / "best.pt").data_split
    assert split[KEYS] == "content"
    assert set(split["trained_keys"]) == _content(runs["p"]) == _content(runs["bmp"])


@pytest.mark.parametrize("held", ["p", "bmp"])
@pytest.mark.parametrize("crop", ["data.crop=false", "data.crop=true"])
def test_a_fine_tune_cannot_hold_out_its_sources_strips_however_it_reads_them(runs, held, crop):
    """init_from=A data.val_path=LEAK (A's strips, or their BMP copies), read with or
    without the crop A read them with: refused in one line, every strip counted."""
    res = _train(
        runs["root"], f"leak-{held}-{crop[-4:]}", f"data.path={runs['q']}",
        f"data.val_path={runs[held]}", f"init_from={runs['A']}", crop,
    )  # fmt: skip
    one_line_error(res, "40 of this run's 40 held-out strips were trained on by")
    assert not (runs["root"] / f"leak-{held}-{crop[-4:]}" / "checkpoints").exists()


@pytest.mark.parametrize("held", ["p", "bmp"])
@pytest.mark.parametrize("crop", [[], ["eval.crop=true"], ["eval.crop=false"]])
def test_eval_folder_refuses_strips_behind_the_weights_however_read(runs, fine_tuned, held, crop):
    """B reads with data.crop=false, A trained with the crop: ``eval B --folder p`` (or
    its BMP copy, at any eval.crop) reads A's training strips as a test: refused."""
    res = run_cli(
        "eval", fine_tuned, "--folder", runs[held], *crop, "eval.maps_k=0", cwd=runs["root"]
    )
    one_line_error(res, "40 of its 40 strips were trained on by this run's weights")
    ok = run_cli(
        "eval",
        fine_tuned,
        "--folder",
        runs["v"],
        "eval.n_boot=10",
        "eval.maps_k=0",
        cwd=runs["root"],
    )
    assert ok.returncode == 0, ok.stderr


def test_a_record_of_an_older_attnlab_is_checked_the_old_way(runs):
    """A record without ``image_keys`` holds keys of strips as read (at its height, with
    its crop): those are compared with keys computed that way, at both crops."""
    ckpt = checkpoint.load(runs["A"] / "checkpoints" / "best.pt")
    d, record = ckpt.run_config().data, ckpt.data_split
    height = int(d.height)
    # as an older attnlab recorded A's strips: read at its height with its crop (true)
    cache = decode_all(open_source(runs["p"]), height, True, lambda m: None)
    old = {k: v for k, v in record.items() if k != KEYS}
    old["trained_keys"] = [image_key(im)[:KEY] for im in cache.images]
    assert not set(old["trained_keys"]) & set(record["trained_keys"])  # another kind of key
    assert all(k in keys for k, keys in zip(old["trained_keys"], legacy_keys(
        open_source(runs["p"]), height), strict=True))  # fmt: skip
    trained = TrainedKeys(old["trained_keys"])
    trained.read = True
    for crop in (False, True):
        with pytest.raises(UserError, match="40 of its 40 strips were trained on"):
            folder_cache(runs["p"], d, crop, trained=trained, warn=lambda m: None)
    # a fine-tune's held-out set (content keys) against the older record: read that way too
    split = {"path": str(runs["q"]), "val_path": str(runs["p"]), "held_out": []}
    split["held_out_keys"] = sorted(_content(runs["p"]))
    with pytest.raises(UserError, match="40 of this run's 40 held-out strips were trained"):
        check_leak(old, split, "init_from=OLD", [], height)
    clean = {**split, "val_path": str(runs["v"]), "held_out_keys": sorted(_content(runs["v"]))}
    check_leak(old, clean, "init_from=OLD", [], height)  # never trained on: accepted
