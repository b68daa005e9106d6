"""An npz file of handwritten digits (``npz=PATH``: ``images`` uint8 (N, 28, 28), white ink
on black as MNIST draws it, each digit scaled into a 20 x 20 box, and ``labels`` (N,) digits
0-9, such as the project's 2,500 MNIST digits, ``../shared/data/handwritten_digits.npz``; it
is read where it is, never copied), read and checked (``load_npz``: anything else is one
line naming the file and what is wrong), and its samples split into the pools
(``split_pools``): by sample, stratified by digit and fixed by ``split_seed``, a fifth of each
digit (50 of 250) is pool ``test``, the rest pool ``train``. Composing strips of them is
``attnlab.data.handwritten_pools``'s.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from attnlab.errors import UserError

TEST_SHARE = 0.2  # of each digit of an npz file: its test pool (50 of 250)
FEWEST = 5  # samples of each digit an npz file must hold (one or more in each pool)
SIDE, BOX = 28, 20  # MNIST: each digit scaled into a 20 x 20 box of a 28 x 28 image


def load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``images`` (N, 28, 28) uint8, white on black, and ``labels`` (N,) 0-9 of an npz file,
    checked: anything else is one UserError line naming the file and what is wrong."""
    where = f"--npz {path}"
    if not path.is_file():
        raise UserError(f"{where}: {'not a file' if path.exists() else 'no such file'}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, AttributeError, TypeError) as err:
        raise UserError(f"{where}: not a NumPy .npz file of arrays ({err})") from err
    want = f"images (N, {SIDE}, {SIDE}) uint8 and labels (N,) integers 0-9"
    missing = [k for k in ("images", "labels") if k not in arrays]
    if missing:
        held = ", ".join(sorted(arrays)) or "nothing"
        raise UserError(f"{where}: no {' or '.join(missing)} array (it holds {held}); want {want}")
    images, labels = arrays["images"], arrays["labels"]
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (SIDE, SIDE):
        raise UserError(f"{where}: images is {images.dtype} {images.shape}; want {want}")
    if labels.shape != (len(images),) or not np.issubdtype(labels.dtype, np.integer):
        raise UserError(
            f"{where}: labels is {labels.dtype} {labels.shape} for {len(images)} images; "
            f"want {want}"
        )
    _check_samples(where, images, labels)
    return images, labels.astype(np.int64)


def _check_samples(where: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Labels 0-9, at least FEWEST of each digit, every image inked, white on black."""
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise UserError(f"{where}: labels run {labels.min()}-{labels.max()}; want digits 0-9")
    counts = np.bincount(labels, minlength=10)
    if counts.min() < FEWEST:
        d = int(counts.argmin())
        raise UserError(
            f"{where}: digit {d} has {counts[d]} sample(s); each of 0-9 needs {FEWEST} or more "
            f"(a fifth of each digit is the test pool)"
        )
    blank = np.flatnonzero(images.reshape(len(images), -1).max(1) == 0)
    if blank.size:
        raise UserError(f"{where}: image {blank[0]} holds no ink ({blank.size} such)")
    if np.median(images) > 127:
        raise UserError(f"{where}: images look dark on light; want white ink on black (MNIST)")


def split_pools(labels: np.ndarray, seed: int) -> dict[str, list[int]]:
    """Sample indices of each pool: TEST_SHARE of each digit (drawn from ``seed``) in
    ``test``, the rest in ``train``; disjoint, sorted, fixed by the seed."""
    gen = torch.Generator().manual_seed(seed)
    test: list[int] = []
    for d in range(10):
        of = np.flatnonzero(labels == d)
        k = max(1, round(TEST_SHARE * len(of)))
        test += of[torch.randperm(len(of), generator=gen)[:k].numpy()].tolist()
    held = set(test)
    return {"train": [i for i in range(len(labels)) if i not in held], "test": sorted(test)}
