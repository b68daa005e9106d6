"""``attnlab read``: arbitrary strip images through a trained reader."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from attnlab.config import RunTaskConfig, check_beam
from attnlab.data.folder import load_image, warn_stderr
from attnlab.data.notes import Tally, shown
from attnlab.data.strips import StripBatch, pad_strips
from attnlab.errors import UserError
from attnlab.evaluation.figures import maps
from attnlab.evaluation.inference import Readings, read_strips
from attnlab.runs import locate
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.restore import restore
from attnlab.runs.rundir import RunDir


def printable(text: str) -> str:
    return text if "\n" not in text and "\r" not in text else repr(text)[1:-1]


def map_names(paths: list[Path]) -> list[str]:
    """One attention-map file name per image, all different: a/x.png and b/x.png would
    otherwise overwrite each other's map. A stem shared by several images gets its folder's
    name in front (a_x, b_x); names still equal (the same file twice) are numbered."""
    shared = Counter(p.stem.casefold() for p in paths)
    used: set[str] = set()
    names = []
    for p in paths:
        base = p.stem if shared[p.stem.casefold()] == 1 else f"{p.absolute().parent.name}_{p.stem}"
        name, k = base, 2
        while name.casefold() in used:  # casefold: one file on a case-insensitive disk
            name, k = f"{base}_{k}", k + 1
        used.add(name.casefold())
        names.append(f"{name}_attention.png")
    return names


def say_if_training(run: Path | str, ckpt: Path, warn: Callable[[str], None] = warn_stderr) -> None:
    """A run that is still training (its lock held by ``train``): say, in one warning line,
    that its checkpoint is read as it is now (eval and export refuse such a run; reading it
    is how one looks at a run in progress, so it is read, not refused)."""
    folder = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else Path(run)
    holder = RunDir(folder).lock_holder()
    if holder is None or not holder.startswith("train"):
        return
    try:
        step = f" at step {RunDir(folder).read_status().step}"
    except RunFileError:
        step = ""
    warn(
        f"{folder}: still training ({holder}{step}): reading {ckpt.name} as it is now; it "
        "changes as training goes on"
    )


def read_loaded(
    reader, dev: torch.device, loaded: list[torch.Tensor], beam: int
) -> tuple[StripBatch, Readings]:
    """Loaded images (each (height, W)) -> their padded batch and readings: the one reading
    step of ``attnlab read`` and of ``attnlab.load(...).read``."""
    spans = torch.zeros(len(loaded), 1, 2, dtype=torch.long)  # (N, 1, 2): no glyph spans
    strips = pad_strips(loaded, [""] * len(loaded), spans)
    return strips, read_strips(reader, strips, dev, 64, beam)


def read_files(
    images: list[Path],
    run: str | None,
    attention_dir: Path | None,
    beam: int,
    which: str,
    device: str,
    say: Callable[[str], None],
    crop: bool = True,
    onnx: Path | None = None,
) -> int:
    """Read every image that can be read; returns how many could not (each named on stderr).
    ``crop``: each image's ink is placed as the generator places it (``crop_to_ink``).
    A name with a newline or another control character is printed quoted, so that every
    image stays one line of the output. ``onnx``: an export instead of ``run``."""
    if (run is None) == (onnx is None):
        raise UserError("read: give one of --run RUN and --onnx EXPORT")
    if onnx is not None:
        return read_files_onnx(images, onnx, attention_dir, beam, say, crop)
    check_beam(beam, "--beam")
    RunTaskConfig.check_run(which, device)
    ckpt = locate.resolve(run, which)
    say_if_training(run, ckpt)
    got = restore(ckpt, device)
    reader, cfg, dev = got.reader, got.config, got.device
    loaded, names, bad = load_files(images, lambda p, w: load_image(p, cfg.data.height, w, crop))
    if not loaded:
        return bad
    strips, out = read_loaded(reader, dev, loaded, beam)
    images_of = [strips.images[i, :, : int(strips.widths[i])].numpy() for i in range(len(names))]
    _say_readings(names, images_of, out, reader.name, reader.encoder.stride, attention_dir, say)
    return bad


def load_files(images: list[Path], load: Callable) -> tuple[list, list[Path], int]:
    """Each image that can be read, loaded by ``load(path, warn)``; its name; and how many
    could not (each named in one error line on stderr; the others are still read). Light
    ink on dark paper is said once, with a count (``notes.Tally``)."""
    loaded, names, bad, tally = [], [], 0, Tally(warn_stderr)
    for path in images:
        try:
            loaded.append(load(path, tally))
            names.append(Path(path))
        except UserError as err:  # this file alone: the others are still read
            print(f"attnlab: error: {printable(str(err))}", file=sys.stderr)
            bad += 1
    tally.close(len(images))
    return loaded, names, bad


def _say_readings(names, images, out, reader: str, stride: int, attention_dir, say) -> None:
    """The table ``attnlab read`` prints, and the attention maps when asked for."""
    width = max(len(shown(p)) for p in names)
    say(f"{'file':<{width}}  {'reading':<12}  confidence")
    for i, path in enumerate(names):
        say(f"{shown(path):<{width}}  {out.texts[i] or '(empty)':<12}  {out.confidence[i]:.3f}")
    if attention_dir is None:
        return
    if out.weights is None:
        say(f"{reader} reader: it has no attention weights, so no maps are drawn")
        return
    for i, (path, file) in enumerate(zip(names, map_names(names), strict=True)):
        target = Path(attention_dir) / file
        maps.draw_attention_map(
            target,
            images[i],
            out.weights[i],
            stride,
            None,
            out.texts[i],
            float(out.confidence[i]),
            None,
            float("nan"),
        )
        say(f"attention map of {shown(path)}: {shown(target)}")


def read_files_onnx(
    images: list[Path],
    folder: Path,
    attention_dir: Path | None,
    beam: int,
    say: Callable[[str], None],
    crop: bool = True,
) -> int:
    """``attnlab read --onnx``: as ``read_files``, through an export's reference loop (its
    preprocessing is the folder loader's, attnlab.data.pixels, without torch)."""
    from attnlab.data import pixels
    from attnlab.export.runtime import Export

    check_beam(beam, "--beam")
    model = Export(folder)
    loaded, names, bad = load_files(
        images, lambda p, w: pixels.load_image(p, model.height, crop=crop, warn=w)
    )
    if not loaded:
        return bad
    out = model.read_strips(loaded, beam)
    if out.weights is not None:  # each strip's own steps and columns, as read_strips keeps
        out.weights = [
            out.weights[i, : len(t) + 1, : out.columns[i]] for i, t in enumerate(out.texts)
        ]
    _say_readings(
        names, loaded, out, model.meta["reader"], model.meta["stride"], attention_dir, say
    )
    return bad
