"""How many labelled strips does a user need (#35): ``train.freeze``, ``data.limit``, the
data-needs curve in the report and the forgetting evaluation of fine-tuned sweep jobs.

Real parts throughout: strips written by ``attnlab data export``, runs and a sweep trained
by the CLI (preset=tiny: the numbers mean nothing, the files are real), the report read
back from disk."""

from __future__ import annotations

import json
import logging
from collections import Counter, OrderedDict
from pathlib import Path

import pandas as pd
import pytest
import torch

from attnlab.data import strip_cache
from attnlab.data.limit import draw, limit_order
from attnlab.errors import UserError
from attnlab.models import registry
from attnlab.training.freeze import check_freeze, part_parameters

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1"]
# the tiny preset's glyph settings, so the export shares the session's glyph bank
GLYPHS = ["data.font_sizes=[26]", "data.stroke_widths=[0]", "data.variants=2"]


@pytest.fixture(scope="module")
def strips(tmp_path_factory, attnlab_run) -> Path:
    """200 exported strips of lengths 1-3 (the tiny preset's seen lengths): 20 held out."""
    root = tmp_path_factory.mktemp("strips")
    res = attnlab_run("data", "export", root / "s", "--n", 200, "--lengths", "1-3", *GLYPHS,
                      cwd=root)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return root / "s"


# --- train.freeze ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", registry.names())
def test_every_parameter_of_every_reader_is_in_exactly_one_part(name):
    node = registry.config_node(name)
    with torch.device("meta"):
        model = registry.build(node, 32)
    owner: dict[str, str] = {}
    for part in type(model).PARTS:
        for key in part_parameters(model, part):
            assert key not in owner, f"{key} is in parts {owner[key]} and {part}"
            owner[key] = part
    assert set(owner) == {k for k, _ in model.named_parameters()}
    assert "encoder" in type(model).PARTS


def test_a_bad_part_name_is_one_line_listing_the_parts_and_exit_2(attnlab_run, tmp_path):
    run = tmp_path / "run"
    res = attnlab_run("train", *TINY, "model=fixed", "train.freeze=[encoder,decodr]",
                      f"hydra.run.dir={run}", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "no part 'decodr'" in lines[0] and "its parts: encoder, decoder, output" in lines[0]
    assert not any(run.rglob("*"))  # refused before anything was written (Hydra's empty dir)
    with pytest.raises(UserError, match="nothing would train"):
        check_freeze(["encoder", "output"], registry.get("ctc").reader, "ctc")
    assert check_freeze(["encoder", "encoder"], registry.get("ctc").reader, "ctc") == ["encoder"]


def test_a_frozen_encoder_stays_bit_identical_and_has_no_optimiser_state(
    trained, strips, attnlab_run, tmp_path
):
    """Fine-tuned on labelled strips with one character more (the output rows mapped by
    character, the new one re-initialised), the encoder frozen: its weights are the source's
    to the bit after training, and the optimiser holds state for the other parts only."""
    src = trained["attention"]
    run = tmp_path / "ft"
    res = attnlab_run("train", *TINY, f"init_from={src}", "data=folder", f"data.path={strips}",
                      "data.charset=0123456789X", "train.freeze=[encoder]",
                      f"hydra.run.dir={run}", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    before = torch.load(src / "checkpoints" / "best.pt", weights_only=True)["model"]
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    after = ckpt["model"]
    enc = [k for k in after if k.startswith("encoder.")]
    assert enc and all(torch.equal(after[k], before[k]) for k in enc)
    assert not torch.equal(after["cell.weight_hh"], before["cell.weight_hh"])  # it trained
    assert after["out.weight"].shape[0] == before["out.weight"].shape[0] + 1  # one more row
    trainable = {k: v for k, v in after.items() if not k.startswith("encoder.")}
    state = ckpt["optimizer"]["state"]
    assert len(state) == len(trainable) == len(ckpt["optimizer"]["param_groups"][0]["params"])
    sizes = sorted(s["exp_avg"].numel() for s in state.values())
    assert sizes == sorted(v.numel() for v in trainable.values())
    assert ckpt["config"]["train"]["freeze"] == ["encoder"]
    assert ckpt["init_from"]["new_characters"] == "X"


# --- data.limit -----------------------------------------------------------------------------


def test_the_draw_order_is_nested_balanced_and_says_where_a_length_runs_short(caplog):
    labels = ["1"] * 5 + ["22"] * 40 + ["333"] * 40  # length 1 runs out at 5
    order = limit_order(labels, seed=3)
    assert sorted(order) == list(range(len(labels)))
    pool = [100 + i for i in range(len(labels))]
    small = draw(pool, labels, 9, 3, "f")
    assert small == draw(pool, labels, 30, 3, "f")[:9]  # the first 9 of 30
    assert Counter(len(labels[p - 100]) for p in small) == {1: 3, 2: 3, 3: 3}
    with caplog.at_level(logging.INFO, logger="attnlab.train"):
        big = draw(pool, labels, 45, 3, "f")
    assert Counter(len(labels[p - 100]) for p in big) == {1: 5, 2: 20, 3: 20}
    assert "lengths 1 (5) have fewer training strips than an equal share (15)" in caplog.text
    assert draw(pool, labels, 9, 4, "f") != small  # another seed, another draw
    with pytest.raises(UserError, match=r"data.limit=86: f has 85 training strips"):
        draw(pool, labels, 86, 3, "f")


@pytest.fixture(scope="module")
def curve(tmp_path_factory, attnlab_run, trained, strips):
    """A tiny data-needs sweep: 2 limits x scratch/fine-tuned, seed 0, then its report.
    In this process, one job after the other (hydra/launcher=basic): the launcher is not
    what is tested here (test_tasks_sweep.py runs the default one), and the jobs' imports
    and worker processes cost more than their trainings."""
    root = tmp_path_factory.mktemp("curve")
    sweep = root / "sweep"
    src = trained["attention"]
    decoded: Counter[str] = Counter()  # each image file's decodes, over the whole sweep
    real = strip_cache.decode

    def counted(file, *args):
        decoded[Path(file).name] += 1
        return real(file, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(strip_cache, "decode", counted)
        mp.setattr(strip_cache, "_DECODED", OrderedDict())  # none kept from earlier tests
        res = attnlab_run("sweep", "lengths", *TINY, "model=attention", "seed=0", "data=folder",
                          f"data.path={strips}", "data.limit=20,60", f"init_from=null,{src}",
                          "hydra/launcher=basic", f"hydra.sweep.dir={sweep}",
                          cwd=root)  # fmt: skip
    assert res.returncode == 0, res.stderr
    rep = attnlab_run("report", sweep, "--out", root / "report", cwd=root)
    assert rep.returncode == 0, rep.stderr
    jobs = {}
    for cfg in sweep.glob("*/.hydra/config.yaml"):
        from omegaconf import OmegaConf

        c = OmegaConf.load(cfg)
        jobs[(c.data.limit, c.init_from is not None)] = cfg.parent.parent
    return root / "report", jobs, src, decoded


def test_nested_draws_and_the_same_held_out_strips_for_every_limit(curve):
    _, jobs, _, _ = curve
    split = {k: json.loads((run / "data_split.json").read_text()) for k, run in jobs.items()}
    small, big = split[(20, False)], split[(60, False)]
    assert small["held_out"] == big["held_out"] and len(small["held_out"]) == 20
    assert small["split_fingerprint"] == big["split_fingerprint"]  # the split, before the draw
    assert (small["trained"], big["trained"], big["pool"]) == (20, 60, 180)
    assert big["drawn_ids"][:20] == small["drawn_ids"]  # nested
    assert split[(20, True)]["drawn_ids"] == small["drawn_ids"]  # same seed, same strips
    labels = pd.read_csv(Path(small["path"]) / "labels.csv", dtype=str)
    length = dict(zip(labels["filename"], labels["label"].str.len(), strict=True))
    assert Counter(length[i] for i in small["drawn_ids"]) == {1: 7, 2: 7, 3: 6}


def test_the_sweep_decodes_each_strip_once_for_its_checks_and_its_jobs(curve):
    """The sweep builds each of its 4 jobs' trainers to check them before the first starts,
    then runs them in this process (hydra/launcher=basic): the folder's strips are decoded
    once for all of that (strip_cache._DECODED; 8 times each before). Each job's evaluation
    reads its 20 held-out strips again, and only those."""
    _, jobs, _, decoded = curve
    held = set(json.loads((jobs[(20, False)] / "data_split.json").read_text())["held_out"])
    assert len(decoded) == 200 and len(held) == 20
    assert {n: c for n, c in decoded.items() if n not in held and c != 1} == {}
    assert {decoded[n] for n in held} == {1 + len(jobs)}


def test_a_resume_with_another_limit_is_refused(curve, copy_run, attnlab_run, tmp_path):
    _, jobs, _, _ = curve
    run = copy_run(jobs[(20, False)])
    before = (run / "checkpoints" / "last.pt").read_bytes()
    cfg = json.loads(json.dumps(torch.load(run / "checkpoints" / "last.pt")["config"]))
    res = attnlab_run("train", *TINY, "model=attention", "data=folder",
                      f"data.path={cfg['data']['path']}", "data.limit=60",
                      f"hydra.run.dir={run}", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2
    assert "data.limit=20; this command: data.limit=60" in res.stderr
    assert (run / "checkpoints" / "last.pt").read_bytes() == before
    fresh = tmp_path / "over"
    over = attnlab_run("train", *TINY, "model=attention", "data=folder",
                       f"data.path={cfg['data']['path']}",
                       "data.limit=181", f"hydra.run.dir={fresh}", cwd=tmp_path)  # fmt: skip
    assert over.returncode == 2 and len(over.stderr.strip().splitlines()) == 1
    assert "has 180 training strips" in over.stderr and not any(fresh.rglob("*"))


# --- the report: the curve, its table, readable names, forgetting ---------------------------


def test_the_limit_sweep_draws_a_log_axis_curve_and_data_needs_csv(curve):
    from attnlab.report import discover_runs
    from attnlab.report.aggregate import aggregate
    from attnlab.report.swept import draw as draw_swept
    from attnlab.report.swept import lines_of, points
    from attnlab.report.variants import assign_variants

    report, jobs, src, _ = curve
    assert (report / "swept_data_limit_held_out_greedy.png").is_file()
    runs = discover_runs([next(iter(jobs.values())).parent])
    assign_variants(runs)
    pts = [p for p in points(aggregate(runs), runs) if p.eval == "held-out-greedy"]
    lines = lines_of(pts, "data.limit")
    assert len(lines) == 2 and all(len(v) == 2 for v in lines.values())  # scratch, fine-tuned
    fig = draw_swept("data.limit", "held-out-greedy", lines, {})
    assert fig.axes[2].get_xscale() == "log"
    tuned = f"init_from={src.name} (attention)"
    assert any(tuned in label for label in lines) and not any(str(src) in k for k in lines)

    needs = pd.read_csv(report / "data_needs.csv", dtype={"length": str})
    summary = pd.read_csv(report / "summary.csv", dtype={"length": str})
    seen = needs[(needs["length"] == "all") & (needs["split"] == "seen")]
    assert sorted(seen["limit"]) == [20, 60] and set(seen["eval"]) == {"held-out-greedy"}
    for r in seen.to_dict("records"):
        assert tuned in r["a"] and "init_from=null" in r["b"]
        assert f"data.limit={r['limit']}" in r["a"] and f"data.limit={r['limit']}" in r["b"]
        for side in ("a", "b"):
            row = summary[
                (summary["variant"] == r[side]) & (summary["eval"] == r["eval"])
                & (summary["length"] == "all") & (summary["split"] == "seen")
            ]  # fmt: skip
            assert len(row) == 1
            assert r[f"exact_{side}"] == pytest.approx(row.iloc[0]["exact_acc"])
            assert r[f"cer_{side}"] == pytest.approx(row.iloc[0]["cer"])
        assert r["exact_diff"] == pytest.approx(r["exact_a"] - r["exact_b"])
        assert r["exact_diff_lo"] <= r["exact_diff"] <= r["exact_diff_hi"]
        # straight from the runs' readings: the fine-tuned run's CER on its held-out strips
        run = jobs[(r["limit"], True)]
        read = pd.read_csv(run / "eval" / "held-out-greedy" / "readings.csv", dtype=str)
        edits = read[["sub", "ins", "del"]].astype(int).sum().sum()
        assert r["cer_a"] == pytest.approx(edits / read["truth"].str.len().sum())
        assert r["n_strips"] == len(read) == 20
    md = (report / "summary.md").read_text()
    assert "## How many strips: each arm against scratch at each N" in md
    assert "How many strips" in (report / "index.html").read_text()


def test_the_third_arm_is_paired_with_scratch_and_with_the_same_labels_alone(
    curve, strips, attnlab_run, tmp_path
):
    """The curve's third arm: the fine-tuned job's labels (data.limit=20, init_from=RUN) with
    the rest of the pool unlabelled (data.unlabelled: the pool's images but the held-out
    ones), swept into a sweep of its own. The report of both sweeps pairs it with scratch
    and with the fine-tuned arm at N=20 (what the unlabelled strips add), each difference
    the two variants' own accuracies apart, and leaves N=60's pair as it was."""
    import shutil

    report, jobs, src, _ = curve
    held = set(json.loads((jobs[(20, True)] / "data_split.json").read_text())["held_out"])
    images = tmp_path / "images"
    images.mkdir()
    for png in strips.glob("*.png"):
        if png.name not in held:
            shutil.copy(png, images / png.name)
    third = tmp_path / "third"
    res = attnlab_run("sweep", "lengths", *TINY, "model=attention", "seed=0", "data=folder",
                      f"data.path={strips}", "data.limit=20", f"init_from={src}",
                      f"data.unlabelled={images}", "hydra/launcher=basic",
                      f"hydra.sweep.dir={third}", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = tmp_path / "report"
    rep = attnlab_run("report", jobs[(20, True)].parent, third, "--out", out, cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    needs = pd.read_csv(out / "data_needs.csv", dtype={"length": str})
    seen = needs[(needs["length"] == "all") & (needs["split"] == "seen")]
    seen = seen[seen["eval"] == "held-out-greedy"]

    def given(label: str) -> bool:  # a variant given unlabelled strips
        return "data.unlabelled=" in label and "data.unlabelled=null" not in label

    pairs = {
        (r["limit"], given(r["a"]), "init_from=null" in r["b"], given(r["b"]))
        for r in seen.to_dict("records")
    }
    assert pairs == {(20, False, True, False), (20, True, True, False), (20, True, False, False),
                     (60, False, True, False)}  # fmt: skip
    summary = pd.read_csv(out / "summary.csv", dtype={"length": str})
    for r in seen.to_dict("records"):
        for side in ("a", "b"):
            row = summary[
                (summary["variant"] == r[side]) & (summary["eval"] == r["eval"])
                & (summary["length"] == "all") & (summary["split"] == "seen")
            ]  # fmt: skip
            assert r[f"exact_{side}"] == pytest.approx(row.iloc[0]["exact_acc"])
        assert r["exact_diff"] == pytest.approx(r["exact_a"] - r["exact_b"])
    md = (out / "summary.md").read_text()
    assert "## How many strips: each arm against scratch at each N" in md
    assert "not paired" not in md


def test_fine_tuned_sweep_jobs_are_also_read_on_the_synthetic_test_sets(curve):
    report, jobs, _, _ = curve
    for (_, tuned), run in jobs.items():
        evals = sorted(p.name for p in (run / "eval").iterdir())
        assert evals == (["held-out-greedy", "synthetic-greedy"] if tuned else ["held-out-greedy"])
    summary = pd.read_csv(report / "summary.csv", dtype={"length": str})
    forgetting = summary[summary["eval"] == "synthetic-greedy"]
    assert set(forgetting["variant"].str.contains("init_from=attention")) == {True}
    assert (report / "swept_data_limit_synthetic_greedy.png").is_file()


def test_a_run_without_a_limit_is_no_point_of_the_curve_and_does_not_hide_it():
    """The run fine-tuned from (data.limit=null: its whole data) may sit in the same report
    line; the curve is still drawn, from the runs that have a count."""
    from attnlab.report.swept import Point, lines_of, numeric_keys

    def point(limit: str, source: str) -> Point:
        keys = {"data.limit": limit, "init_from": source, "top of the seen lengths": "3"}
        return Point("1-3", "held-out-greedy", "attention", keys, {"seen": (0.5, 0.4, 0.6, 1)})

    pts = [point("null", "null"), point("20", "null"), point("60", "null"), point("20", "a")]
    assert "data.limit" in numeric_keys(pts)
    lines = lines_of(pts, "data.limit")
    assert {k: [p.keys["data.limit"] for p in v] for k, v in lines.items()} == {
        "attention · init_from=null": ["20", "60"],
        "attention · init_from=a": ["20"],
    }


def test_a_started_from_run_is_named_by_its_folder_and_reader(trained):
    import json as j

    from attnlab.report.variants import source_names

    src = trained["attention"]
    values = [
        f"{src}/checkpoints/best.pt",
        "/x/multirun/2026-12-03/10-00-00/0",
        "/x/multirun/2026-12-03/11-00-00/0",
        "/elsewhere/model.pt",
    ]
    names = source_names([j.dumps(v) for v in values] + ["null"])
    assert names == {
        values[0]: "attention (attention)",  # the run's folder; its reader from its config
        values[1]: "10-00-00/0",  # a sweep job: its sweep's folder too, then as many as differ
        values[2]: "11-00-00/0",
        values[3]: "model.pt",
    }


def test_runs_made_before_the_new_keys_count_as_their_default():
    """An older run's config lacks train.freeze and data.limit: it is a seed of today's
    default variant (not a variant of its own) and it resumes under today's defaults."""
    from attnlab.report.variants import identity
    from attnlab.runs.resume import check_same_config

    old = {"model.name": '"attention"', "optim.lr": "0.006"}
    new = {**old, "train.freeze": "[]", "data.limit": "null"}
    assert identity(old, "1-8") == identity(new, "1-8")
    assert identity(old, "1-8") != identity({**new, "train.freeze": '["encoder"]'}, "1-8")
    saved = {"model": {"name": "attention"}, "train": {"steps": 10}, "data": {}}
    now = {"model": {"name": "attention"}, "train": {"steps": 10, "freeze": []},
           "data": {"limit": None}}  # fmt: skip
    check_same_config(saved, now, Path("x"))  # no refusal
    with pytest.raises(UserError, match=r"train.freeze=\[\]; this command: train.freeze="):
        check_same_config(saved, {**now, "train": {"steps": 10, "freeze": ["encoder"]}}, Path("x"))


def test_a_limit_sweep_without_init_from_says_why_it_has_no_data_needs_section(
    curve, attnlab_run, tmp_path
):
    """The curve's scratch jobs alone (data.limit=20,60, init_from=null): a real data.limit
    sweep with nothing started from a trained reader. The report draws no "How many
    strips" section and no data_needs.csv, and says why on the command line, on the page and
    in summary.md; the full curve's report (which has the section) says nothing of it."""
    import shutil

    report, jobs, _, _ = curve
    for (limit, started), job in jobs.items():
        if not started:
            shutil.copytree(
                job, tmp_path / "runs" / str(limit), ignore=shutil.ignore_patterns(".lock")
            )
    res = attnlab_run("report", tmp_path / "runs", "--out", tmp_path / "report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    why = "data.limit is swept (2 value(s)) but no run started from a trained reader"
    lines = [line for line in res.stdout.splitlines() if "left out" in line]
    assert lines == [f'report: section "How many strips" left out: {why}' + lines[0].split(why)[1]]
    assert "init_from=null,RUN" in lines[0]
    assert not (tmp_path / "report" / "data_needs.csv").exists()
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Section “How many strips” left out: " + why in page
    assert 'id="data-needs"' not in page
    md = (tmp_path / "report" / "summary.md").read_text()
    assert f"## Sections left out\n\n- How many strips: {why}" in md
    for text in ((report / "index.html").read_text(), (report / "summary.md").read_text()):
        assert "How many strips” left out" not in text and "- How many strips:" not in text
