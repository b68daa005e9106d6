"""Held-out typeface benchmark: does a reader read typefaces it was not trained on?

    python scripts/typefaces.py                          # every family, default training
    python scripts/typefaces.py --families serif,mono    # a subset
    python scripts/typefaces.py --model fixed --steps 800 --n 100
    python scripts/bench.py --only typefaces             # the same, from the bench

For each typeface family of the default training fonts (shipped inside Python packages,
so every machine has them), one reader is trained with that family left out
(``data.exclude_fonts``) and evaluated (``attnlab eval --folder``) on two kinds of strips in
the left-out family:

- ``synthetic``: attnlab's own generator restricted to the family (same composition, unseen
  typeface), with the lab's variation (per-glyph size, shear, rotation, gaps, blur, noise;
  no whole-strip warps or stretch), so that the test strips stay put when training
  variation is added;
- ``whole-string``: strings drawn as text by Pillow in one call, with the font's own advance
  widths and kerning (no per-glyph gaps, no per-glyph warps), at a height other than the
  model's (48 px, resized on reading), with mild noise and blur: a composition the
  generator never made.

It prints exact accuracy with its 95% Wilson interval on the seen lengths per family and
kind, and overall. Runs, strips and evaluations stay under --out (default
/tmp/attnlab_typefaces) for a look at the maps and readings.csv of each. Test strips are
drawn once per --strips folder (default: under --out) and reused, so two trainings (say,
before and after a change, ``--override KEY=VALUE``) are read on the very same strips.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab.bench.common import run_cli
from attnlab.config import TrainConfig
from attnlab.data.fonts import REPORTLAB_FONTS
from attnlab.io import write_json
from attnlab.runs.resume import hydra_value

# Family -> substrings of its font file names (matched as data.exclude_fonts matches). A
# family holds every default training font of its design, so that leaving it out leaves no
# near-copy of it in training (STIX is modelled on Times). The font packages' faces are
# other designs (a monospace, a humanist sans, a transitional serif) and stay in training.
FAMILIES: dict[str, list[str]] = {
    "serif": ["DejaVuSerif"],  # DejaVu Serif, regular to bold italic
    "sans": ["DejaVuSans.", "DejaVuSans-"],  # DejaVu Sans, not Mono
    "mono": ["DejaVuSansMono", "cmtt10", *REPORTLAB_FONTS["courier"]],  # monospaced
    "times": ["STIXGeneral", *REPORTLAB_FONTS["times"]],  # STIX and ReportLab's Times
    "helvetica": list(REPORTLAB_FONTS["helvetica"]),  # ReportLab's Arial (its Helvetica)
    "computer-modern": ["cmb10", "cmmi10", "cmr10", "cmss10", "cmti10"],  # TeX's, italic too
}
WHOLE_STRING_HEIGHT = 48
# Common typefaces of a Linux system, none of these files in attnlab's training data: a serif,
# a bold sans, a thin monospace, a geometric sans, an italic and a wide book serif. Four are
# clones of a face that is: Liberation Serif and Sans match Times New Roman's and Arial's
# metrics, Nimbus Roman is URW's Times, FreeMono comes from URW's Courier; URW Gothic and
# C059 clone none. Debian: apt-get install fonts-liberation fonts-freefont-ttf fonts-urw-base35
SYSTEM_FONTS = [
    "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
    "/usr/share/fonts/truetype/freefont/FreeMono.ttf",
    "/usr/share/fonts/opentype/urw-base35/URWGothic-Book.otf",
    "/usr/share/fonts/opentype/urw-base35/NimbusRoman-Italic.otf",
    "/usr/share/fonts/opentype/urw-base35/C059-Roman.otf",
]


def family_fonts(family: str) -> list[str]:
    """The family's fonts among the default training fonts (``data.fonts``' default)."""
    from attnlab.config import DataConfig
    from attnlab.data.fonts import resolve_fonts

    keys = FAMILIES[family]
    return [f for f in resolve_fonts(DataConfig()) if any(k in Path(f).name for k in keys)]


def attnlab(*args: object) -> None:
    run_cli("typefaces", *args)


def lab_variation() -> dict:
    """``data=lab`` (conf/data/lab.yaml): the lab's generator, without the glyph forms and
    the training augmentation added since."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(files("attnlab.conf") / "data" / "lab.yaml"))


def synthetic_folder(out: Path, fonts: list[str], n: int, lengths: list[int], seed: int) -> Path:
    """Strips of attnlab's generator with the lab's variation, in these fonts only."""
    import torch

    from attnlab.config import DataConfig
    from attnlab.data.strips import StripSynth
    from attnlab.data.write_strips import export_folder

    synth = StripSynth(DataConfig(fonts=fonts, **lab_variation()))
    gen = torch.Generator().manual_seed(seed)
    per = torch.tensor([n_ for n_ in lengths for _ in range(n)])
    return export_folder(synth.sample(per, gen), out)


def whole_string_folder(
    out: Path, fonts: list[str], n: int, lengths: list[int], seed: int, free: bool = False
) -> Path:
    """Strings drawn as text in one call (the font's own spacing), dark ink on light paper
    with mild noise and blur; a font drawn at random per strip. 48 px high with the text at
    70% of it, or (``free``) text 48 px high in an image with margins of 1-40 px on each side
    (another height and placement for every strip), n strips per length in every font."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    from attnlab.io import csv_rows, write_text

    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for length in lengths:
        for i in range(n * len(fonts) if free else n):
            label = "".join(str(d) for d in rng.integers(0, 10, length))
            path = fonts[i // n] if free else fonts[int(rng.integers(len(fonts)))]
            size = WHOLE_STRING_HEIGHT if free else int(0.7 * WHOLE_STRING_HEIGHT)
            font = ImageFont.truetype(path, size)
            left, top, right, bottom = font.getbbox(label, anchor="ls")
            if free:
                pl, pr, pt, pb = (int(v) for v in rng.integers(1, 41, 4))
                width, h, x, y = right - left + pl + pr, bottom - top + pt + pb, pl - left, pt - top
            else:
                pad = int(rng.integers(4, 12))
                width, h = right - left + 2 * pad, WHOLE_STRING_HEIGHT
                x, y = pad - left, int(0.8 * WHOLE_STRING_HEIGHT)
            paper = int(rng.integers(215, 256))
            ink = int(rng.integers(0, 70))
            img = Image.new("L", (width, h), paper)
            ImageDraw.Draw(img).text((x, y), label, font=font, fill=ink, anchor="ls")
            img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.0, 0.8))))
            pixels = np.asarray(img, dtype=np.float32) + rng.normal(0, 6, (h, width))
            face = f"{Path(path).stem}_" if free else ""
            name = f"ws_{face}{length:02d}_{i:04d}_{label}.png"
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out / name)
            rows.append([name, label])
    write_text(out / "labels.csv", csv_rows(["filename", "label"], rows))
    return out


TEXT = {"source": str, "truth": str, "reading": str}  # readings.csv's text columns


def seen_exact(eval_dir: Path) -> tuple[int, int]:
    """(correct, n) over the seen lengths of one evaluation, from its readings.csv."""
    readings = pd.read_csv(eval_dir / "readings.csv", dtype=TEXT, keep_default_na=False)
    return int(readings["correct"].sum()), len(readings)


def training_seeds(args) -> list[int]:
    """--seed, then the next --seeds - 1 seeds: one training of each per family."""
    return [args.seed + i for i in range(args.seeds)]


def run_dir(root: Path, args, seed: int) -> Path:
    return root / "run" if seed == args.seed else root / f"run-seed{seed}"


def run_family(args, family: str) -> dict[str, list[tuple[int, int]]]:
    """(correct, n) on the seen lengths per kind of strip, one entry per training seed."""
    root = args.out / family
    lengths = list(range(args.lengths[0], args.lengths[1] + 1))
    excluded = "[" + ",".join(f"'{k}'" for k in FAMILIES[family]) + "]"
    out: dict[str, list[tuple[int, int]]] = {"synthetic": [], "whole-string": []}
    strips = (args.strips or args.out) / family
    fonts = family_fonts(family)
    for seed in training_seeds(args):
        run = run_dir(root, args, seed)
        if not (run / "metrics.json").is_file():
            attnlab(
                "train",
                f"model={args.model}",
                f"data.exclude_fonts={excluded}",
                f"data.train_lengths=[{lengths[0]},{lengths[-1]}]",
                f"train.steps={args.steps}",
                f"seed={seed}",
                "train.progress=plain",
                f"hydra.run.dir={hydra_value(run)}",
                *args.override,
            )
        for kind, make in (("synthetic", synthetic_folder), ("whole-string", whole_string_folder)):
            folder = strips / kind
            if not (folder / "labels.csv").is_file():  # drawn once, read by every training
                make(folder, fonts, args.n, lengths, args.seed + 1)
            attnlab("eval", run, "--folder", folder, f"eval.name={kind}", "eval.maps_k=2")
            out[kind].append(seen_exact(run / "eval" / kind))
    return out


def run_system(args) -> dict[str, tuple[int, int]]:
    """Whole-string strips in SYSTEM_FONTS, text 48 px high with free margins, read by a run
    trained on the default data (none of these files), per typeface."""
    missing = [f for f in SYSTEM_FONTS if not Path(f).is_file()]
    if missing:
        raise SystemExit(f"typefaces: --system needs {missing[0]} (see SYSTEM_FONTS)")
    run = args.run or args.out / "system" / "run"
    lengths = list(range(args.lengths[0], args.lengths[1] + 1))
    if not (Path(run) / "metrics.json").is_file():
        attnlab(
            "train",
            f"model={args.model}",
            f"data.train_lengths=[{lengths[0]},{lengths[-1]}]",
            f"train.steps={args.steps}",
            f"seed={args.seed}",
            "train.progress=plain",
            f"hydra.run.dir={hydra_value(run)}",
            *args.override,
        )
    folder = (args.strips or args.out) / "system" / "whole-string"
    if not (folder / "labels.csv").is_file():
        per = max(1, args.n // len(SYSTEM_FONTS))  # as many strips as one family's kind
        whole_string_folder(folder, SYSTEM_FONTS, per, lengths, args.seed + 2, free=True)
    attnlab("eval", run, "--folder", folder, "eval.name=system-whole-string", "eval.maps_k=2")
    readings = pd.read_csv(
        Path(run) / "eval" / "system-whole-string" / "readings.csv",
        dtype=TEXT,
        keep_default_na=False,
    )
    face = readings["source"].str.extract(r"^ws_(.+)_\d\d_\d{4}_\d+\.png$")[0]
    out = {
        name: (int(group["correct"].sum()), len(group))
        for name, group in readings.groupby(face, sort=False)
    }
    out["all"] = (int(readings["correct"].sum()), len(readings))
    return out


def _row(family: str, kind: str, k: int, n: int) -> str:
    from attnlab.evaluation.metrics import wilson_interval

    lo, hi = wilson_interval(k, n)
    return f"{family:<18} {kind:<13} {100 * k / n:6.1f} [{100 * lo:5.1f}, {100 * hi:5.1f}]  {n:4d}"


def _seeds_row(family: str, kind: str, counts: list[tuple[int, int]]) -> str:
    """One training: exact % with its Wilson interval; several: their mean and range."""
    if len(counts) == 1:
        return _row(family, kind, *counts[0])
    acc = [100 * k / n for k, n in counts]
    spread = f"{sum(acc) / len(acc):6.1f} ({min(acc):5.1f} - {max(acc):5.1f})"
    return f"{family:<18} {kind:<13} {spread:>22}  {counts[0][1]:4d} x {len(counts)}"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset")
    p.add_argument("--model", default="attention", help="the reader (model=NAME)")
    p.add_argument(
        "--steps",
        type=int,
        default=TrainConfig.steps,
        help="training steps per family (default: attnlab train's, %(default)s)",
    )
    p.add_argument("--n", type=int, default=60, help="strips per length and kind")
    p.add_argument("--lengths", type=int, nargs=2, default=[1, 8], help="seen lengths LO HI")
    p.add_argument("--seed", type=int, default=0, help="the test strips' and first training's")
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="trainings per family (seeds --seed, --seed + 1, ...): one training moves a "
        "family by several points; several give the mean and the range",
    )
    p.add_argument("--out", type=Path, default=Path("/tmp/attnlab_typefaces"))
    p.add_argument("--strips", type=Path, default=None, help="test strips (default: --out)")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a training override for every family (repeatable)",
    )
    p.add_argument(
        "--system",
        action="store_true",
        help="also: whole-string strips in common system typefaces (SYSTEM_FONTS), read by a "
        "run trained on the default data (--run, else one is trained)",
    )
    p.add_argument("--run", type=Path, default=None, help="--system: a run to read with")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        p.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")

    results = {f: run_family(args, f) for f in families}
    system = run_system(args) if args.system else {}
    spread = "exact % [95% CI]" if args.seeds == 1 else "mean % (min - max)"
    header = f"{'left-out family':<18} {'kind':<13} {spread:>22}   n"
    print(f"\ntypefaces: {args.model} reader, {args.steps} steps, seen {args.lengths}")
    if args.seeds > 1:
        print(f"{args.seeds} trainings per family, seeds {training_seeds(args)}")
    print(header + "\n" + "-" * len(header))
    totals: dict[str, list[tuple[int, int]]] = {}
    rows = []
    for family, kinds in results.items():
        for kind, counts in kinds.items():
            print(_seeds_row(family, kind, counts))
            per_seed = totals.setdefault(kind, [(0, 0)] * len(counts))
            totals[kind] = [(a + k, b + n) for (a, b), (k, n) in zip(per_seed, counts, strict=True)]
            for seed, (k, n) in zip(training_seeds(args), counts, strict=True):
                rows.append({"family": family, "kind": kind, "seed": seed, "correct": k, "n": n})
    for kind, counts in totals.items():
        print(_seeds_row("overall", kind, counts))
    if system:
        print(
            f"\nsystem typefaces, not these files in training ({args.run or 'default training'}):"
        )
        for face, (k, n) in system.items():
            print(_row(face, "whole-string", k, n))
            rows.append({"family": f"system:{face}", "kind": "whole-string", "correct": k, "n": n})
    report = {
        "model": args.model,
        "steps": args.steps,
        "seeds": training_seeds(args),
        "override": args.override,
        "rows": rows,
    }
    if args.json:
        write_json(args.json, report)  # whole or not at all
    return report


if __name__ == "__main__":
    main()
