"""The Python API given what a hostile user gives it (issue 41, items 5 and 8): arrays read
on the scale their dtype and values say, blank or transposed arrays refused, and every bad
argument an ``attnlab.UserError`` in the API's own words; a run still training is read with
a warning. All on the session's trained tiny runs."""

from __future__ import annotations

import re
import signal
import time

import numpy as np
import pytest
import torch
from helpers.runs import start_training
from PIL import Image

import attnlab
from attnlab.data.strips import StripSynth
from attnlab.runs.rundir import RunDir


@pytest.fixture(scope="module")
def reader(trained):
    return attnlab.load(trained["attention"])


@pytest.fixture(scope="module")
def strip(reader) -> np.ndarray:
    """One generated 4-digit strip as (H, W) uint8, as a PNG of it would hold it."""
    batch = StripSynth(reader.config.data).sample(
        torch.tensor([4]), torch.Generator().manual_seed(5)
    )
    pixels = batch.images[0, :, : int(batch.widths[0])].numpy()
    return np.round(pixels * 255).astype(np.uint8)


def same(a, b) -> bool:
    return a.text == b.text and a.confidence == pytest.approx(b.confidence, abs=1e-6)


def test_a_mask_of_integers_reads_as_the_same_mask_of_bools(reader, strip):
    mask = strip > 128
    want = reader.read(mask)[0]
    for dtype in (np.int64, np.int32, np.uint8, np.float32):
        assert same(reader.read(mask.astype(dtype))[0], want), dtype


def test_floats_over_one_stay_on_the_unit_scale(reader, strip):
    want = reader.read(strip)[0]
    unit = strip.astype(np.float64) / 255
    assert same(reader.read(unit)[0], want)
    over = np.where(unit >= 1.0, 1.02, unit)  # resampling's overshoot on the paper
    assert over.max() == pytest.approx(1.02)
    assert same(reader.read(over)[0], want)
    assert same(reader.read(strip.astype(np.float32))[0], want)  # floats on 0-255


@pytest.mark.parametrize(
    "image",
    [np.zeros((32, 90), np.uint8), np.full((32, 90), 255, np.uint8), np.full((32, 90), 0.5),
     np.ones((32, 90), np.int64), np.zeros((32, 90), bool)],
    ids=["black", "white", "grey", "ones", "false"],
)  # fmt: skip
def test_an_image_without_contrast_is_refused(reader, image):
    with pytest.raises(attnlab.UserError, match=r"^<image 0>: no contrast .*nothing to read$"):
        reader.read(image)


def test_a_transposed_strip_is_refused_a_narrow_one_read(reader, strip):
    height = reader.config.data.height
    assert strip.shape[0] == height and strip.shape[1] > height
    with pytest.raises(attnlab.UserError, match=r"^<image 0>: .* not a strip the right way up"):
        reader.read(strip.T)
    with pytest.raises(attnlab.UserError, match="right way up"):
        reader.read(np.repeat(strip.T, 2, axis=0)[:, :10])  # far taller than wide
    one = StripSynth(reader.config.data).sample(torch.tensor([1]), torch.Generator())
    narrow = one.images[0, :, : int(one.widths[0])].numpy()[:, : height - 4]  # (H, <H)
    assert narrow.shape[0] > narrow.shape[1]
    assert len(reader.read(narrow)) == 1


def test_an_rgb_mask_of_bools_reads_as_the_grey_mask(reader, strip):
    mask = strip > 128
    want = reader.read(mask)[0]
    assert same(reader.read(np.repeat(mask[:, :, None], 3, axis=2))[0], want)
    rgba = np.concatenate(
        [np.repeat(mask[:, :, None], 3, axis=2), np.ones_like(mask)[:, :, None]], 2
    )
    assert same(reader.read(rgba)[0], want)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda u: u * 2 - 1, r"float64 values -0.72549\.\.1 go below 0"),  # -1..1
        (lambda u: np.round(u * 254 - 127).astype(np.int8), r"int8 values -\d+\.\.\d+ go below 0"),
        (
            lambda u: np.round(u * 255).astype(np.int16) - 128,
            r"int16 values -\d+\.\.\d+ go below 0",
        ),
        (
            lambda u: np.round(u * 2**40).astype(np.uint64),
            r"uint64 values \d+\.\.\d+ reach above 4294967295",
        ),
        (lambda u: u * 2.0**40, r"float64 values \S+ reach above 4294967295"),
    ],
    ids=["float-1..1", "int8", "int16", "uint64-2^40", "float-2^40"],
)
def test_arrays_on_a_scale_that_would_be_clipped_are_refused(reader, strip, make, words):
    with pytest.raises(attnlab.UserError, match=r"^<image 0>: " + words) as err:
        reader.read(make(strip.astype(np.float64) / 255))
    assert "\n" not in str(err.value)


def test_an_undershoot_below_black_is_read_as_black(reader, strip):
    unit = strip.astype(np.float64) / 255
    black = np.where(unit <= unit.min(), 0.0, unit)  # the darkest ink at 0
    want = reader.read(black)[0]
    under = np.where(black <= 0.0, -0.02, black)  # resampling's undershoot beside the ink
    assert under.min() == pytest.approx(-0.02)
    assert same(reader.read(under)[0], want)


def test_a_transposed_strip_twice_the_readers_height_is_refused(reader, strip, capfd):
    height = reader.config.data.height
    big = np.repeat(np.repeat(strip, 2, axis=0), 2, axis=1)  # (2H, 2W): a 64-px-high strip
    assert big.shape[0] == 2 * height and big.shape[1] > big.shape[0]
    assert len(reader.read(big)) == 1
    with pytest.raises(attnlab.UserError, match=r"right way up .*2 times the reader's height"):
        reader.read(big.T)
    capfd.readouterr()
    odd = np.ascontiguousarray(big.T[:, :-7])  # taller than wide, 57 columns: not a multiple
    assert odd.shape[0] > 2 * odd.shape[1]
    reader.read(odd)
    err = capfd.readouterr().err
    assert err.count("\n") == 1, err
    assert f"attnlab: warning: <image 0>: an array of {odd.shape[0]} rows x 57 columns" in err
    assert "is read as it is" in err


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda r, res: r.read(None), r"^images=None: give a path"),
        (lambda r, res: r.read(5), r"^images=5: give a path"),
        (lambda r, res: r.read([None]), r"^<image 0>: a NoneType is not an image"),
        (lambda r, res: r.read(np.zeros((32, 90)), beam=0), r"^beam=0: must be >= 1"),
        (lambda r, res: r.read(np.zeros((32, 90)), beam=10**9), r"^beam=1000000000: .*at most 64"),
        (lambda r, res: attnlab.load(None), r"^run_or_checkpoint=None: give a run"),
        (lambda r, res: attnlab.load(5), r"^run_or_checkpoint=5: give a run"),
        (lambda r, res: attnlab.load(r.run, which="worst"), r"^which='worst': must be"),
        (lambda r, res: attnlab.results(None), r"^results\(\): path 1 is None"),
        (lambda r, res: attnlab.results(), r"^results\(\): give one or more"),
        (lambda r, res: attnlab.compare(None, "a", "b"), r"^compare\(\): res is NoneType"),
        (lambda r, res: attnlab.compare(res, 1, 2), r"^compare\(\): a=1: name a variant"),
        (lambda r, res: attnlab.compare(res, "nope", "x"), r"^compare\(res, a, b\): 'nope'"),
    ],
)
def test_bad_arguments_are_user_errors_in_api_words(reader, trained, call, words):
    res = attnlab.results(trained["attention"])
    with pytest.raises(attnlab.UserError, match=words) as err:
        call(reader, res)
    assert not re.search(r"(^|\s)--\w|(^|[^_\w])checkpoint=", str(err.value)), err.value
    assert "\n" not in str(err.value)


def test_a_closed_pil_image_is_a_user_error(reader, strip):
    image = Image.fromarray(strip)
    image.close()
    with pytest.raises(attnlab.UserError, match=r"^<image 0>: the PIL image cannot be read"):
        reader.read(image)


@pytest.mark.slow
def test_a_run_still_training_is_read_with_a_warning(trained, copy_run, attnlab_run, capfd):
    """load and read --run read a run in training (that is how one looks at it), but say
    that its best.pt is the one of now; a finished run says nothing of the kind."""
    run = copy_run(trained["attention"])
    attnlab.load(run)
    assert "still training" not in capfd.readouterr().err
    proc = start_training(run, "model=attention", "train.steps=100000")
    try:
        deadline = time.time() + 120
        while not (RunDir(run).lock_holder() or "").startswith("train"):
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
            time.sleep(0.05)
        attnlab.load(run)
        err = capfd.readouterr().err
        assert f"attnlab: warning: {run}: still training (train, pid {proc.pid}" in err, err
        assert err.count("\n") == 1
        png = run.parent / "s.png"
        page = np.full((32, 60), 255, np.uint8)
        page[8:24, 20:24] = 0  # a stroke: a blank page would be refused, not read
        Image.fromarray(page).save(png)
        res = attnlab_run("read", png, "--run", run, cwd=run.parent)
        assert res.returncode == 0 and "still training" in res.stderr, res.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
