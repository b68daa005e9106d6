"""The Hydra tasks behind ``attnlab data preview`` and ``attnlab data export``."""

from __future__ import annotations

from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig

from attnlab.config import DataConfig, ExportConfig, PreviewConfig, seen_lengths
from attnlab.data.strips import StripBatch, StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.errors import UserError, reports_user_errors
from attnlab.io import write_figure
from attnlab.models import registry

registry.discover()  # the readers' schemas: the config is composed as a training config


def _sample(
    cfg: DictConfig, n: int, pair, key: str, seed: int, sort: bool, augment: bool = False
) -> StripBatch:
    """n strips with lengths drawn uniformly from the range ``pair``; ``key`` is the config
    section named in errors (``preview`` or ``export``); ``augment`` as training draws them."""
    DataConfig.check(cfg.data)
    lo, hi = int(pair[0]), int(pair[1])  # checked by the task's section
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=gen)
    return StripSynth(cfg.data).sample(lengths.sort().values if sort else lengths, gen, augment)


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="strips")
@reports_user_errors
def preview(cfg: DictConfig) -> None:
    p = cfg.preview
    PreviewConfig.check(p)
    seen = seen_lengths(cfg.data)
    pair = p.lengths if p.lengths is not None else [min(seen), max(seen)]
    if Path(p.out).is_dir():
        raise UserError(f"preview.out={p.out}: is a folder; name a .png file")
    if Path(p.out).suffix.lower() != ".png":
        raise UserError(f"preview.out={p.out}: the preview is a PNG image; name a .png file")
    if Path(p.out).exists() and not p.force:
        raise UserError(f"preview.out={p.out}: exists; add preview.force=true to replace it")
    strips = _sample(cfg, p.n, pair, "preview", p.seed, sort=True, augment=p.augment)
    out = draw_grid(strips, Path(p.out))
    print(f"wrote {len(strips)} strips to {out}")


def draw_grid(strips: StripBatch, path: Path) -> Path:
    """A PNG grid: one strip per row, its label beside it."""
    from matplotlib.figure import Figure

    n = len(strips)
    w = int(strips.widths.max())
    fig = Figure(figsize=(min(16, 2 + w / 40), 0.45 * n + 0.6), dpi=100)
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, i in zip(axes, range(n), strict=True):
        ax.imshow(strips.images[i].numpy(), cmap="gray", vmin=0, vmax=1, aspect="equal")
        ax.set_xlim(0, w)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_ylabel(
            strips.labels[i], rotation=0, ha="right", va="center", fontsize=10, family="monospace"
        )
    fig.suptitle(f"{n} synthetic strips (label left of each)", fontsize=11)
    fig.tight_layout()
    return write_figure(path, fig)


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="strips")
@reports_user_errors
def export(cfg: DictConfig) -> None:
    e = cfg.export
    ExportConfig.check(e)
    if Path(e.out).exists() and not Path(e.out).is_dir():
        raise UserError(f"export.out={e.out}: exists and is not a folder")
    strips = _sample(cfg, e.n, e.lengths, "export", e.seed, sort=False)
    if e.format == "lmdb":  # the layout data=folder data.path=OUT reads back
        from attnlab.data.write_lmdb import export_lmdb

        if Path(e.out).exists() and any(Path(e.out).iterdir()) and not e.force:
            raise UserError(
                f"export.out={e.out}: not empty; use a new folder, or --force to replace it"
            )
        out = export_lmdb(strips, Path(e.out))
        print(
            f"wrote {len(strips)} strips as an LMDB (num-samples, image-%09d, label-%09d) to {out}"
        )
        return
    out = export_folder(strips, Path(e.out), force=e.force)
    print(f"wrote {len(strips)} strips and labels.csv to {out}")
