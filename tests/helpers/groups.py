"""Strips with groups (a writer, a document) as real files: the same strips as a folder
(labels.csv with a group column), a list file (a third tab field) and an LMDB
(``group-%09d`` records), for tests of held-out groups and what a run recorded."""

from __future__ import annotations

from pathlib import Path

import torch

from attnlab.data.strips import StripBatch, StripSynth
from attnlab.data.write_lmdb import export_lmdb
from attnlab.data.write_strips import export_folder
from helpers.readers import tiny_config


def synth_strips(n: int, seed: int) -> StripBatch:
    """``n`` generator strips of lengths 1-3 (the tiny preset's seen lengths)."""
    gen = torch.Generator().manual_seed(seed)
    synth = StripSynth(tiny_config("attention").data)
    return synth.sample(torch.randint(1, 4, (n,), generator=gen), gen)


def group_of(i: int, groups: int, prefix: str = "g") -> str:
    return f"{prefix}{i % groups:02d}"


def grouped_sources(
    root: Path, n: int = 40, groups: int = 10, seed: int = 7, prefix: str = "g"
) -> dict[str, Path]:
    """``{"folder", "list", "lmdb"}``: ``n`` strips, strip i in group ``group_of(i)``."""
    batch = synth_strips(n, seed)
    folder = export_folder(batch, root / "folder")
    rows = [r.split(",") for r in (folder / "labels.csv").read_text().splitlines()[1:]]
    names = [group_of(i, groups, prefix) for i in range(n)]
    lines = [f"{f},{label},{g}" for (f, label), g in zip(rows, names, strict=True)]
    (folder / "labels.csv").write_text("filename,label,group\n" + "\n".join(lines) + "\n")
    tabs = [f"{f}\t{label}\t{g}\n" for (f, label), g in zip(rows, names, strict=True)]
    (folder / "list.txt").write_text("".join(tabs))
    lmdb = export_lmdb(batch, root / "lmdb", groups=names)
    return {"folder": folder, "list": folder / "list.txt", "lmdb": lmdb}


def plain_folder(root: Path, n: int, seed: int) -> Path:
    """``n`` strips as a folder without groups (labels.csv: filename,label)."""
    return export_folder(synth_strips(n, seed), root)
