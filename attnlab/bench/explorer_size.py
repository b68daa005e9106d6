"""Page size and load time of the report's explorer at the default sweep's scale.

    .venv/bin/python scripts/explorer_size.py [--explore-n 16 32 64] [--out DIR]

Writes, per explore_n, the explore.json files of a default-sized sweep (6 runs: 3 seeds of
each lab reader, one training range, lengths 1-16) on the default data's real test strips
(``fixed_set``, height 32, stride 8), with readings and attention rows made up (the real
readings' sizes: a reading as long as its truth, peaked rows over the real columns), builds
a page holding only the explorer, and prints its size and, when Chromium and Playwright are
there, the time to load it and the time one Next step takes. No training, no torch model.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from attnlab.config import DataConfig
from attnlab.data.strips import StripSynth, fixed_set
from attnlab.evaluation import explore
from attnlab.evaluation.inference import Readings
from attnlab.io import write_text
from attnlab.report.explorer import explorer
from attnlab.report.html import render_index
from attnlab.report.reader_styles import colours
from attnlab.report.run_info import RunInfo
from attnlab.runs.rundir import RunDir

READERS = (("fixed", False), ("attention", True))
SEEDS = (0, 1, 2)
LENGTHS = range(1, 17)
STRIDE = 8  # model.stride's default


class _Reader:
    def __init__(self, name: str):
        self.name = name

    def digit_probs(self, *_):
        raise NotImplementedError  # the steps are made up below


def _readings(strips, weights: bool, rng) -> Readings:
    texts = [t if rng.random() > 0.2 else t[:-1] for t in strips.labels]
    rows = None
    if weights:
        rows = []
        for text, width in zip(texts, strips.widths.tolist(), strict=True):
            cols = -(-width // STRIDE)
            w = rng.dirichlet(np.full(cols, 0.2), size=len(text) + 1)
            rows.append(w)
    return Readings(texts, rng.random(len(texts)), rows)


def build(root: Path, n: int, data: DataConfig | None = None) -> Path:
    """The page of a default-sized sweep's explorer (``data``: default DataConfig())."""
    synth = StripSynth(data or DataConfig())
    sets = {k: fixed_set(synth, "test", k, n) for k in LENGTHS}
    rng = np.random.default_rng(0)
    runs = []
    for reader, weights in READERS:
        for seed in SEEDS:
            run = root / "runs" / f"{reader}-{seed}"
            by_length = {k: (s, _readings(s, weights, rng)) for k, s in sets.items()}
            sources = {k: (s, [f"test-len{k:02d}#{i}" for i in range(n)]) for k, s in sets.items()}
            doc = explore.sample(_Reader(reader), None, sources, by_length, n, STRIDE)
            for s in doc["strips"]:  # made-up steps: as many as the reading has, then EOS
                s["steps"] = [round(float(p), 4) for p in rng.random(len(s["reading"]) + 1)]
            explore.write(RunDir(run).eval_dir("synthetic-greedy").explore, doc)
            runs.append(
                RunInfo(
                    run, reader, seed, "1-8", list(range(1, 9)), "complete", ["synthetic-greedy"]
                )
            )
    page = render_index(
        [root / "runs"], runs, [], colours(r.reader_name for r in runs), [], explorer=explorer(runs)
    )
    return write_text(root / f"index_{n}.html", page)  # whole or not at all


def load_time(index: Path) -> tuple[float, float] | None:
    binary = next(
        (shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None
    )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if binary is None:
        return None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(index.resolve().as_uri(), wait_until="load")
        page.wait_for_selector(".ex-view")
        # navigation start to the end of the load event: HTML and JSON parsed, first strip drawn
        loaded = page.evaluate(
            "() => performance.getEntriesByType('navigation')[0].loadEventEnd / 1000"
        )
        page.select_option("#ex-length", index=15)  # length 16: the widest strips
        # one Next step, in the page: every view and the matrix redrawn (before paint)
        step = page.evaluate(
            "() => { const t = performance.now(); document.getElementById('ex-next').click();"
            " return (performance.now() - t) / 1000; }"
        )
        b.close()
    return loaded, step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--explore-n", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--out", type=Path, default=None, help="keep the pages here")
    args = ap.parse_args(argv)
    root = args.out or Path(tempfile.mkdtemp(prefix="explorer_size_"))
    for n in args.explore_n:
        index = build(root / f"n{n}", n)
        size = index.stat().st_size
        strips = len(LENGTHS) * n
        line = f"explore_n={n}: {strips} strips, page {size / 1e6:.2f} MB"
        line += f" ({size / strips:.0f} B per strip, 6 runs)"
        timing = load_time(index)
        if timing:
            line += f", load {timing[0]:.2f} s, one step {1000 * timing[1]:.0f} ms"
        print(line, flush=True)
    if args.out is None:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
