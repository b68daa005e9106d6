"""attnlab probe: occlusion, glyph swap and saliency on hand-made readers whose answer is known,
the numbers behind them, and the command end to end with the report over it."""

from __future__ import annotations

import html
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from attnlab.config import DataConfig, ProbeConfig
from attnlab.data.fonts import bundled_fonts
from attnlab.data.glyphs import DIGITS
from attnlab.data.strips import StripSynth, fixed_set
from attnlab.errors import UserError
from attnlab.evaluation.occlusion import (
    attended_glyph,
    occlusion_variants,
    paper_level,
    random_glyph,
)
from attnlab.evaluation.probe_strips import probe_set, rerender
from attnlab.evaluation.probe_summary import (
    PROBE_METRIC,
    SUMMARY_COLUMNS,
    cluster_bootstrap,
    summary_table,
)
from attnlab.evaluation.probe_tables import occlusion_table, saliency_table, swap_table
from attnlab.evaluation.saliency import column_saliency, spearman
from attnlab.models.base import Decoded, Reader
from attnlab.runs.probedir import ProbeDir

STRIDE = 4


def clean_data(**changes) -> DataConfig:
    """Strips of one typeface without noise, blur or shading: white paper (1.0), black ink,
    at least 2 px between glyphs, so that a hand-made reader can read them exactly."""
    font = next(f for f in bundled_fonts() if Path(f).name == "DejaVuSans.ttf")
    base = dict(
        fonts=[font], font_sizes=[26], stroke_widths=[0], variants=1, gap=[2, 4],
        noise=[0.0, 0.0], blur=[0.0, 0.0], contrast=[1.0, 1.0], background=[1.0, 1.0],
    )  # fmt: skip
    return DataConfig(**{**base, **changes})


class ColumnReader(Reader):
    """Every step's probability is a function of the ink in one encoder column only (pixels
    ``[col*STRIDE, (col+1)*STRIDE)``), and its attention is all on that column."""

    name = "column"

    def __init__(self, col: int):
        nn.Module.__init__(self)
        self.encoder = SimpleNamespace(stride=STRIDE)
        self.col = col

    def _p(self, images: torch.Tensor) -> torch.Tensor:
        block = images[:, :, self.col * STRIDE : (self.col + 1) * STRIDE]
        return torch.tanh(10 * (1 - block).mean((1, 2)))  # (B,) 0 on blank paper

    def digit_probs(self, images, widths, texts):
        steps = max(len(t) for t in texts) + 1
        mask = torch.tensor([[s <= len(t) for s in range(steps)] for t in texts])
        return self._p(images)[:, None] * mask

    def weights(self, widths: torch.Tensor, steps: int) -> list[np.ndarray]:
        out = []
        for w in widths.tolist():
            one = np.zeros((steps, -(-w // STRIDE)))
            one[:, self.col] = 1.0
            out.append(one)
        return out

    @torch.no_grad()
    def read(self, images, widths, beam=1, lengths=None):
        texts = ["7" if p > 0.5 else "" for p in self._p(images).tolist()]
        ones = torch.ones(len(images))
        return Decoded(texts, ones, None, -(-widths // STRIDE), ones)


class TemplateReader(Reader):
    """Reads clean strips exactly: cuts them at blank columns and names each piece by the
    digit of the glyph bank (the strips' one typeface) it equals."""

    name = "template"

    def __init__(self, synth: StripSynth):
        nn.Module.__init__(self)
        self.encoder = SimpleNamespace(stride=STRIDE)
        bank = synth.bank
        self.templates = [
            bank.columns[0, 0, d, 0, : int(bank.widths[0, 0, d, 0])].T.float() / 255
            for d in range(10)
        ]  # ink (H, w) of each digit

    def _read_one(self, image: torch.Tensor) -> str:
        ink = 1 - image
        inked = (ink > 0).any(0).tolist() + [False]
        text, start = "", None
        for x, on in enumerate(inked):
            if on and start is None:
                start = x
            elif not on and start is not None:
                piece = ink[:, start:x]
                errors = [
                    float((piece - t).abs().sum()) if t.shape == piece.shape else float("inf")
                    for t in self.templates
                ]
                text += DIGITS[int(np.argmin(errors))]
                start = None
        return text

    @torch.no_grad()
    def read(self, images, widths, beam=1, lengths=None):
        texts = [self._read_one(images[i, :, : int(w)]) for i, w in enumerate(widths.tolist())]
        ones = torch.ones(len(images))
        return Decoded(texts, ones, None, -(-widths // STRIDE), ones)


def _cfg(**changes) -> ProbeConfig:
    return ProbeConfig(**{"n_boot": 200, **changes})


# --------------------------------------------------------------------------- strips


def test_probe_set_is_the_fixed_set_and_rerenders_it_with_one_glyph_swapped():
    synth = StripSynth(DataConfig(font_sizes=[26], stroke_widths=[0], variants=2))
    ps = probe_set(synth, 5, 6)
    ref = fixed_set(synth, "probe", 5, 6)
    assert torch.equal(ps.strips.images, ref.images) and ps.strips.labels == ref.labels
    assert torch.equal(rerender(synth, ps, ps.digits).images, ref.images)
    digits = ps.digits.clone()
    digits[:, 2] = (digits[:, 2] + 1) % 10
    swapped = rerender(synth, ps, digits)
    for i, (old, new) in enumerate(zip(ref.labels, swapped.labels, strict=True)):
        assert [k for k in range(5) if old[k] != new[k]] == [2]
        left = int(ref.spans[i, 2, 0])  # everything left of the swapped glyph is unchanged
        assert torch.equal(ref.images[i, :, :left], swapped.images[i, :, :left])
        assert torch.equal(ref.spans[i, :3, 0], swapped.spans[i, :3, 0])


def test_paper_level_is_the_strips_own_paper_and_occlusion_paints_only_the_glyph():
    synth = StripSynth(clean_data(background=[0.83, 0.83]))
    strips = fixed_set(synth, "probe", 4, 3)
    paper = paper_level(strips.images, strips.widths, strips.spans)
    assert paper.tolist() == pytest.approx([0.83] * 3, abs=1e-6)
    image, spans = strips.images[0], strips.spans[0]
    variants = occlusion_variants(image, spans, 0.83)
    assert variants.shape == (5, *image.shape) and torch.equal(variants[0], image)
    for g, (a, b) in enumerate(spans.tolist()):
        changed = (variants[g + 1] != image).any(0).nonzero().flatten()
        assert changed.min() >= a and changed.max() < b  # nothing outside the glyph's span
        assert bool((variants[g + 1][:, a:b] == 0.83).all())


def test_attended_glyph_maps_the_peak_column_to_the_glyph_holding_it():
    spans = np.array([[2, 10], [12, 20], [24, 30]])
    one_hot = np.eye(8)
    assert attended_glyph(one_hot[1], spans, 4) == (0, 1, True)  # pixels 4-8 in glyph 0
    assert attended_glyph(one_hot[3], spans, 4) == (1, 3, True)  # 12-16: glyph 1
    assert attended_glyph(one_hot[2], spans, 4) == (0, 2, True)  # 8-12: 2 px of 0, none of 1
    assert attended_glyph(one_hot[7], spans, 4) == (2, 7, True)  # 28-30 of glyph 2
    gapped = np.array([[2, 10], [16, 20]])
    assert attended_glyph(one_hot[3], gapped, 4) == (1, 3, False)  # 12-16 is paper: nearest
    assert attended_glyph(one_hot[0][:1], spans[1:], 4) == (0, 0, False)  # margin: nearest
    rng = np.random.default_rng(0)
    picks = {random_glyph(4, 1, 2, rng) for _ in range(50)}
    assert picks == {0, 3}  # never the step's own glyph nor the attended one
    assert random_glyph(2, 0, 1, rng) == 1 and random_glyph(1, 0, 0, rng) == -1


# --------------------------------------------------------------------------- occlusion


def test_occluding_the_column_a_reader_reads_hurts_and_no_other_glyph_does():
    synth = StripSynth(clean_data())
    strips = fixed_set(synth, "probe", 4, 5)
    # The one column every step reads: the middle of glyph 1 of the first strip, a column
    # that lies inside glyph 1 of every strip here.
    spans = strips.spans[:, 1]
    col = int((spans[0, 0] + spans[0, 1]) // 2) // STRIDE
    inside = [(a <= col * STRIDE and (col + 1) * STRIDE <= b) for a, b in spans.tolist()]
    strips = strips.select([i for i, ok in enumerate(inside) if ok])
    assert len(strips) >= 2
    reader = ColumnReader(col)
    weights = reader.weights(strips.widths, 5)
    rows, example = occlusion_table(
        reader, strips, weights, "cpu", _cfg(batch_size=7), np.random.default_rng(0)
    )
    assert set(rows["condition"]) == {"attended", "true", "random", "none"}
    assert (rows.loc[rows["condition"] == "attended", "glyph"] == 1).all()
    painted = rows[rows["condition"] != "none"]
    hit = painted[painted["glyph"] == 1]
    miss = painted[painted["glyph"] != 1]
    assert len(hit) and len(miss)
    # free decoding: this reader reads "7" while it sees ink in its column, else nothing
    assert (hit["drop"] > 0.3).all() and (hit["reading"] == "").all()
    assert miss["drop"].abs().max() < 1e-6 and (miss["reading"] == "7").all()
    assert rows.loc[rows["condition"] == "none", "drop"].abs().max() < 1e-6
    # the example's (step, glyph) matrix: only glyph 1's column drops
    assert (example["drops"][:, 1] > 0.3).all()
    assert np.abs(np.delete(example["drops"], 1, axis=1)).max() < 1e-6

    sal = saliency_table(reader, strips, weights, "cpu", _cfg())
    assert (sal["peak_saliency"] == col).all() and (sal["spearman"] > 0).all()


def test_gradient_saliency_lies_on_the_column_read():
    synth = StripSynth(clean_data())
    strips = fixed_set(synth, "probe", 3, 2)
    col = int(strips.spans[0, 0].float().mean()) // STRIDE
    reader = ColumnReader(col)
    paper = paper_level(strips.images, strips.widths, strips.spans)
    sal = column_saliency(reader, strips.images, strips.widths, strips.labels, paper, STRIDE)
    assert [s.shape[0] for s in sal] == [3, 3]
    assert sal[0][:, col].min() > 0
    assert np.delete(sal[0], col, axis=1).max() == 0


def test_a_glyph_swap_changes_exactly_its_step_for_a_reader_that_reads_correctly():
    synth = StripSynth(clean_data())
    ps = probe_set(synth, 6, 12)
    reader = TemplateReader(synth)
    texts = reader.read(ps.strips.images, ps.strips.widths).texts
    assert texts == ps.strips.labels  # it reads these strips correctly
    chosen = np.arange(12)
    rows = swap_table(reader, synth, ps, chosen, "cpu", _cfg(swaps=3), np.random.default_rng(1))
    assert len(rows) == 36 and rows["only_step"].all() and rows["reads_new"].all()
    assert (rows["old"] != rows["new"]).all()
    assert rows.groupby("strip")["position"].nunique().eq(3).all()  # three places per strip


# --------------------------------------------------------------------------- numbers


def test_bootstrap_interval_contains_the_mean():
    rng = np.random.default_rng(3)
    values = rng.normal(0.4, 0.3, size=120)
    clusters = np.repeat(np.arange(30), 4)
    mean, lo, hi = cluster_bootstrap(values, clusters, n_boot=500, seed=0)
    assert mean == pytest.approx(values.mean())
    assert lo < mean < hi and hi - lo < 0.4
    assert cluster_bootstrap(np.full(8, 0.25), np.arange(8)) == (0.25, 0.25, 0.25)
    nan = cluster_bootstrap(np.array([np.nan]), np.array([0]))
    assert all(np.isnan(nan))
    assert np.isnan(cluster_bootstrap(np.ones(3), np.arange(3), n_boot=0)[1])


def test_spearman_uses_average_ranks():
    assert spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1)
    assert spearman(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1)
    # ties: ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4) -> Pearson of those
    expected = np.corrcoef([1.5, 1.5, 3, 4], [1, 2, 3, 4])[0, 1]
    assert spearman(np.array([0, 0, 1, 2]), np.array([1, 2, 3, 4])) == pytest.approx(expected)
    assert np.isnan(spearman(np.ones(4), np.arange(4)))


def test_summary_table_has_every_metric_per_length_and_split():
    occ = pd.DataFrame(
        [
            {"length": n, "strip": s, "step": t, "condition": c, "glyph": g, "drop": d,
             "drop_earlier": 0.0, "digit_changed": c in ("attended", "true")}
            for n in (2, 4) for s in range(3) for t in range(n)
            for c, g, d in (("attended", t, 0.9), ("true", t, 0.8), ("random", (t + 1) % n, 0.1),
                            ("none", -1, 0.0))
        ]
    )  # fmt: skip
    swaps = pd.DataFrame(
        [{"length": n, "strip": s, "only_step": s > 0, "reads_new": True}
         for n in (2, 4) for s in range(3)]
    )  # fmt: skip
    sal = pd.DataFrame([{"length": 2, "strip": 0, "spearman": 0.5}])
    table = summary_table(occ, swaps, sal, [2, 4, 6], [1, 2, 3], 100, 0)
    assert list(table.columns) == SUMMARY_COLUMNS
    assert list(zip(table["length"], table["split"], strict=True)) == [
        (2, "seen"), (4, "unseen"), (6, "unseen"), ("all", "seen"), ("all", "unseen")
    ]  # fmt: skip
    two = table.iloc[0]
    assert two["drop_attended"] == pytest.approx(0.9) and two["excess"] == pytest.approx(0.8)
    assert two["flip_attended"] == 1.0 and two["flip_random"] == 0.0
    assert two["swap_only"] == pytest.approx(2 / 3) and two["spearman"] == 0.5
    assert two["n_strips"] == 3 and two["n_steps"] == 6 and two["peak_on_true"] == 1.0
    assert table.iloc[2]["n_strips"] == 0 and np.isnan(table.iloc[2]["drop_true"])
    assert table.iloc[4]["n_strips"] == 3  # length 6 had none: the unseen total is length 4


def test_probe_config_values_are_checked():
    ProbeConfig.check(ProbeConfig())
    for bad in ({"n": 0}, {"pool": 0}, {"swaps": -1}, {"lengths": [0, 3]}, {"name": "a/b"}):
        with pytest.raises(UserError, match=next(iter(bad))):
            ProbeConfig.check(ProbeConfig(**bad))


# --------------------------------------------------------------------------- end to end


def test_probe_command_and_report_section(trained, copy_run, attnlab_run, tmp_path):
    runs = {kind: copy_run(trained[kind], kind) for kind in ("attention", "fixed")}
    for kind, run in runs.items():
        res = attnlab_run(
            "probe", run, "probe.n=4", "probe.pool=120", "probe.lengths=[1,2]", cwd=tmp_path
        )
        assert res.returncode == 0, res.stderr
        out = ProbeDir(run / "probe" / "synthetic")
        for path in (out.occlusion, out.swaps, out.saliency, out.summary, out.meta_file):
            assert path.is_file(), path
        meta = json.loads(out.meta_file.read_text())
        ckpt = torch.load(run / "checkpoints/best.pt", weights_only=True)
        assert meta["step"] == ckpt["step"] and meta["reader"] == kind
        assert meta["has_weights"] == (kind == "attention")
        assert out.meta_file.stat().st_mtime_ns >= out.summary.stat().st_mtime_ns  # last
        summary = pd.read_csv(out.summary, dtype={"length": str})
        assert list(summary.columns) == SUMMARY_COLUMNS
        assert summary["n_strips"].iloc[0] > 0  # some length-1 strips are read correctly
        assert out.example.is_file() and meta["example"]["length"] == 1
        occ = pd.read_csv(out.occlusion)
        assert ("attended" in set(occ["condition"])) == (kind == "attention")
        assert not list((run / "probe").glob(".*"))  # no partial folder left

    report = tmp_path / "report"
    res = attnlab_run("report", *runs.values(), "--out", report, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    page = html.unescape((report / "index.html").read_text())
    md = (report / "summary.md").read_text()
    assert "Does attention cause the reading?" in page and "Does attention cause" in md
    assert page.count("probe example:") == 2  # one example figure per reader
    for run in runs.values():
        summary = pd.read_csv(ProbeDir(run / "probe/synthetic").summary, dtype={"length": str})
        row = summary[summary["length"] == "1"].iloc[0]
        shown = 0
        for name in ("drop_true", "flip_true", "swap_only"):
            m = PROBE_METRIC[name]
            cell = m.fmt(row[name], row[f"{name}_lo"], row[f"{name}_hi"])
            if cell != "n/a":
                assert cell in page and cell in md, (name, cell)
                shown += 1
        assert shown == 3
    probes_csv = pd.read_csv(report / "probes.csv", dtype={"length": str})
    assert set(probes_csv["reader"]) == {"attention", "fixed"}


def _probe_files(run: Path, step: int, drop: float, name: str = "synthetic") -> None:
    """A probe folder as `attnlab probe` writes it (summary.csv and probe.json only)."""
    from attnlab.runs.probedir import ProbeMeta

    out = ProbeDir(run / "probe" / name)
    out.path.mkdir(parents=True)
    rows = []
    for length, split in ((2, "seen"), ("all", "seen")):
        row = {c: np.nan for c in SUMMARY_COLUMNS}
        row.update(length=length, split=split, n_strips=10, n_steps=20, n_swaps=10)
        for key, value in (("drop_attended", drop), ("drop_random", 0.05), ("swap_only", 0.9)):
            row.update({key: value, f"{key}_lo": value - 0.01, f"{key}_hi": value + 0.01})
        rows.append(row)
    pd.DataFrame(rows, columns=SUMMARY_COLUMNS).to_csv(out.summary, index=False)
    out.write_meta(ProbeMeta(name, "attention", [1, 2, 3], [2], 10, 50, "best.pt", step, True, 1.0))


def test_report_averages_probes_over_seeds_and_lists_those_that_do_not_count(tmp_path):
    from helpers.runs import write_run

    from attnlab.report import build_report

    for seed, drop in ((0, 0.8), (1, 0.9)):
        run = write_run(tmp_path / f"runs/{seed}", seed=seed, train=(1, 3))
        _probe_files(run, 1500, drop)
    stale = write_run(tmp_path / "runs/2", seed=2, train=(1, 3))
    _probe_files(stale, 700, 0.1)
    (stale / "probe/.other.partial").mkdir()
    index = build_report([tmp_path / "runs"], tmp_path / "report")
    page = html.unescape(index.read_text())
    md = (tmp_path / "report/summary.md").read_text()
    agg = pd.read_csv(tmp_path / "report/probes.csv", dtype={"length": str})
    row = agg[agg["length"] == "all"].iloc[0]
    assert row["n_seeds"] == 2 and row["interval"] == "min-max"
    assert row["drop_attended"] == pytest.approx(0.85) and row["n_strips"] == 20
    cell = "0.85 [0.80, 0.90]"  # the seed mean, min-max over the two seeds
    assert cell in page and cell in md
    sentence = f"occluding the attended glyph lowers the read digit's probability by {cell}"
    assert sentence in page and sentence in md
    assert "stale (read step 700, best is step 1500)" in page and "probe/other: partial" in md
    one = build_report([tmp_path / "runs/0"], tmp_path / "one")  # one seed: its own interval
    assert "0.80 [0.79, 0.81]" in one.read_text()
    bare = write_run(tmp_path / "bare/0", seed=0, train=(1, 3))
    page = build_report([bare], tmp_path / "bare_report").read_text()
    assert "No probes found" in page and not (tmp_path / "bare_report/probes.csv").exists()
