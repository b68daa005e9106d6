"""``attnlab sweep tuned`` (issue #42): every reader tuned with the same budget, its best trial
re-run with new seeds, and the report's expected best against the number of trials and the
winners' paired difference. One real preset=tiny study (two readers x 4 trials x 2 seeds);
the refusals before any trial, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from attnlab.report.expected_max import dodge, unbiased

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")

TRIALS, SEEDS = 4, 2
# A tiny budget: the numbers mean nothing, the files and lines are what is tested.
BUDGET = ["preset=tiny", "train.threads=1", "train.progress=plain", "hydra/launcher=basic",
          "train.steps=6", "train.val_every=6", "eval.n=3", "eval.maps_k=0"]  # fmt: skip
# The search space: one key every reader has, one only the attention reader has.
AXES = ["optim.lr=interval(0.001,0.05)", "model.attn_dim=choice(8,16)"]


def error_line(res) -> str:
    assert res.returncode == 2, (res.stdout[-2000:], res.stderr[-2000:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, said",
    [
        (["model.nope=choice(1,2)"], "model.nope=choice(1,2): no reader here has model.nope"),
        (["tune.trials=1"], "tune.trials=1: must be >= 2"),
        (["tune.first_seed=0"], "include the trials' seed(s) [0]; choose a tune.first_seed"),
        (["seed=choice(3,4)", "tune.first_seed=4"], "include the trials' seed(s) [4]"),
        (["tune.sampler=grid"], "tune.sampler='grid': must be one of random, tpe"),
        (["model=fixed"], "name two or more"),
        (["tune.trails=3"], "config: Could not override 'tune.trails'"),  # a misspelt key
        (["hydra/sweeper=optuna"], "sets the sweeper itself (tune.sampler, tune.trials)"),
        (["tune.minutes=0"], "tune.minutes=0.0: must be a number of minutes > 0"),
        (["tune.minutes=1", "train.minutes=2"], "tune.minutes=1 and train.minutes=2: tune.minu"),
    ],
)
def test_what_cannot_be_studied_fairly_is_refused_in_one_line(attnlab_run, tmp_path, args, said):
    base = ["model=fixed,attention", *BUDGET, AXES[0], f"hydra.sweep.dir={tmp_path / 'study'}"]
    base = [a for a in base if not (a.startswith("model=") and any(
        b.startswith("model=") for b in args))]  # fmt: skip
    res = attnlab_run("sweep", "tuned", *base, *args, cwd=tmp_path)
    assert said in error_line(res)
    assert not (tmp_path / "study").exists()  # nothing ran, nothing written


def test_the_trials_budget_and_the_re_runs_seeds_are_their_own():
    from attnlab.tasks.tuned import rerun_args, study_args
    from attnlab.tasks.tuned_plan import plan

    p = plan(["model=fixed,attention", "preset=tiny", "seed=7", "train.steps=9", "tune.steps=3",
              "tune.seeds=2", *AXES])  # fmt: skip
    trial = study_args(p, "fixed")
    assert "train.steps=3" in trial and "train.steps=9" not in trial  # tune.steps: the trials'
    assert not any(a.startswith("model.attn_dim=") for a in trial)  # fixed lacks it
    assert "hydra.sweeper.n_trials=12" in trial and "hydra/sweeper/sampler=random" in trial
    best = {"overrides": ["optim.lr=0.003", "model=fixed", "seed=7", "train.steps=3"]}
    again = rerun_args(p, "fixed", best)
    assert "train.steps=9" in again and "optim.lr=0.003" in again
    assert [a for a in again if a.startswith("seed=")] == ["seed=1,2"]  # not the trials' 7


@pytest.mark.parametrize(
    "args, said",
    [
        (["tune.minutes=-1"], "tune.minutes=-1.0: must be a number of minutes > 0"),
        (["tune.minutes=nan"], "tune.minutes=nan: must be a number of minutes > 0"),
        (["tune.minutes=inf"], "tune.minutes=inf: must be a number of minutes > 0"),
        (["tune.minutes=1e9"], "tune.minutes=1000000000.0: must be a number of minutes > 0"),
        (["tune.minutes=abc"], "config: Error merging override tune.minutes=abc"),
        (["train.minutes=1,2"], "train.minutes=1,2: a budget in minutes is the same for every"),
        (["train.minutes=choice(1,2)"], "a budget in minutes is the same for every trial"),
    ],
)
def test_a_budget_in_minutes_that_cannot_be_given_is_refused_in_one_line(args, said):
    from attnlab.errors import UserError
    from attnlab.tasks.tuned_plan import plan

    with pytest.raises(UserError) as err:
        plan(["model=fixed,attention", "preset=tiny", AXES[0], *args])
    assert said in str(err.value) and "\n" not in str(err.value)


def test_tune_minutes_is_every_trials_and_every_re_runs_budget():
    from attnlab.tasks import tuned_record
    from attnlab.tasks.tuned import rerun_args, study_args
    from attnlab.tasks.tuned_plan import plan

    base = ["model=fixed,attention", "preset=tiny", "train.steps=100000", AXES[0]]
    p = plan([*base, "tune.minutes=0.5"])
    best = {"overrides": ["optim.lr=0.003"]}
    assert "train.minutes=0.5" in study_args(p, "fixed") and "train.steps=100000" in study_args(
        p, "fixed"
    )
    again = rerun_args(p, "fixed", best)
    assert "train.minutes=0.5" in again  # the winners' re-runs: the same minutes,
    assert "hydra/launcher=basic" in again  # one at a time as the trials (not sharing the CPU)
    named = rerun_args(plan([*base, "tune.minutes=0.5", "hydra/launcher=parallel"]), "fixed", best)
    assert "hydra/launcher=parallel" in named and "hydra/launcher=basic" not in named
    steps_only = plan(base)
    assert steps_only.minutes is None and "hydra/launcher=basic" not in rerun_args(
        steps_only, "fixed", best
    )
    assert not any(a.startswith("train.minutes=") for a in study_args(steps_only, "fixed"))
    # tuned.json records the minutes; a study asked with others is another study
    asked = tuned_record.settings(p)
    assert asked["minutes"] == 0.5
    assert tuned_record.differences({**asked, "minutes": 0.5}, asked) == []
    assert tuned_record.differences({**asked, "minutes": 1}, asked) == [
        "minutes per trial and re-run (tune.minutes) 1 there, 0.5 here"
    ]
    older = {k: v for k, v in asked.items() if k != "minutes"}  # a study of steps, from before
    assert tuned_record.differences(older, asked) == [
        "minutes per trial and re-run (tune.minutes) null there, 0.5 here"
    ]
    assert tuned_record.differences(older, tuned_record.settings(steps_only)) == []
    # a train.minutes of the command's own (no tune.minutes) is the budget recorded
    plain = plan([*base, "train.minutes=0.5"])
    assert plain.minutes == 0.5 and "train.minutes=0.5" in rerun_args(plain, "fixed", best)
    assert tuned_record.settings(plain)["minutes"] == 0.5


@pytest.fixture(scope="module")
def study(tmp_path_factory, attnlab_run):
    cwd = tmp_path_factory.mktemp("tuned")
    root = cwd / "study"
    res = attnlab_run(
        "sweep", "tuned", "model=fixed,attention", f"tune.trials={TRIALS}",
        f"tune.seeds={SEEDS}", *BUDGET, *AXES, f"hydra.sweep.dir={root}", cwd=cwd,
    )  # fmt: skip
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    report = attnlab_run("report", str(root), "--out", str(cwd / "report"), cwd=cwd)
    assert report.returncode == 0, report.stderr[-3000:]
    return res, root, report, cwd / "report"


def trials(root: Path, reader: str) -> pd.DataFrame:
    return pd.read_csv(root / "study" / reader / "trials.csv", dtype={"dir": str})


def config(run: Path) -> dict:
    return yaml.safe_load((run / ".hydra" / "config.yaml").read_text())


@pytest.mark.slow
def test_every_reader_gets_the_same_budget_and_sampler(study):
    res, root, _, _ = study
    readers = ["fixed", "attention"]
    assert res.stdout.count("has no model.attn_dim") == 1  # said once, for the reader lacking it
    assert "model=fixed has no model.attn_dim" in res.stdout
    assert "sampler random (Optuna, seed 0)" in res.stdout
    for reader in readers:
        table = trials(root, reader)
        assert list(table.trial) == list(range(TRIALS)) and set(table.state) == {"complete"}
        for row in table.itertuples():
            trial = root / "study" / reader / row.dir
            cfg = config(trial)
            assert (cfg["model"]["name"], cfg["train"]["steps"], cfg["seed"]) == (reader, 6, 0)
            assert cfg["train"]["objective"] == "val_exact"
            hydra = yaml.safe_load((trial / ".hydra" / "hydra.yaml").read_text())["hydra"]
            sampler = hydra["sweeper"]["sampler"]
            assert sampler["_target_"].endswith("RandomSampler") and sampler["seed"] == 0
            assert hydra["sweeper"]["n_trials"] == TRIALS
            assert ("model.attn_dim=" in row.overrides) == (reader == "attention")
    # The same seeded sampler: the first trial of each study draws the same learning rate.
    lrs = [config(root / "study" / r / trials(root, r).dir[0])["optim"]["lr"] for r in readers]
    assert lrs[0] == pytest.approx(lrs[1])


@pytest.mark.slow
def test_each_best_trial_is_re_run_with_new_seeds(study):
    _, root, _, _ = study
    manifest = json.loads((root / "tuned.json").read_text())
    for reader in ("fixed", "attention"):
        table = trials(root, reader)
        best = table.sort_values(["value", "trial"], ascending=[False, True]).iloc[0]
        assert manifest["best"][reader]["trial"] == best.trial
        won = config(root / "study" / reader / best.dir)
        runs = sorted((root / "winners" / reader).glob("*/.hydra/config.yaml"))
        assert len(runs) == SEEDS
        seeds = set()
        for path in runs:
            cfg = yaml.safe_load(path.read_text())
            seeds.add(cfg["seed"])
            assert cfg["optim"]["lr"] == pytest.approx(won["optim"]["lr"])
            assert cfg["model"].get("attn_dim") == won["model"].get("attn_dim")
            assert list(path.parents[1].glob("eval/*/readings.csv"))  # on the test strips
        assert seeds == {1, 2}  # never the trials' seed 0


def _mean_correct(run: Path, lengths: set[int]) -> float:
    (readings,) = run.glob("eval/*/readings.csv")
    r = pd.read_csv(readings, dtype={"truth": str, "reading": str})
    r = r[r["length"].isin(lengths)]
    return float(r["correct"].astype(str).str.lower().eq("true").mean())


@pytest.mark.slow
def test_the_report_draws_the_curves_and_pairs_the_winners(study):
    _, root, report, out = study
    frame = pd.read_csv(out / "expected_max.csv")
    assert list(frame.columns) == ["variant", "n", "estimator", "expected", "lo", "hi"]
    for reader in ("fixed", "attention"):
        values = trials(root, reader).value.tolist()
        for name, estimator in (("unbiased", unbiased), ("dodge", dodge)):
            rows = frame[(frame.variant == reader) & (frame.estimator == name)]
            assert rows.n.tolist() == list(range(1, TRIALS + 1))
            assert rows.expected.tolist() == pytest.approx(estimator(values))
            assert (rows.lo <= rows.expected + 1e-12).all() and (
                rows.expected <= rows.hi + 1e-12
            ).all()
    page = (out / "index.html").read_text()
    summary = (out / "summary.md").read_text()
    crossing = next(ln for ln in report.stdout.splitlines() if "expected-best curves" in ln)
    assert " cross " in crossing or "do not cross" in crossing or "are equal" in crossing
    assert crossing in summary and "Equal tuning budgets" in page
    # The trials train and validate only: none is listed as a run without an evaluation.
    bad = summary.split("## Incomplete or failed runs", 1)[1]
    assert "/study/" not in bad.split("\n## ", 1)[0]
    assert list(out.glob("tuned_*.png"))
    line = next(ln for ln in report.stdout.splitlines() if "after equal tuning" in ln)
    assert line.startswith("attention − fixed after equal tuning")
    assert line in summary
    # The seen total recomputed from the winners' own readings: mean over seed pairs.
    seen = set(config(next((root / "winners" / "fixed").glob("*/")))["data"]["train_lengths"])
    seen = set(range(min(seen), max(seen) + 1))
    diffs = []
    for seed in (1, 2):
        a, b = (
            next(p.parent.parent for p in (root / "winners" / r).glob("*/.hydra/config.yaml")
                 if yaml.safe_load(p.read_text())["seed"] == seed)
            for r in ("attention", "fixed")
        )  # fmt: skip
        diffs.append(_mean_correct(a, seen) - _mean_correct(b, seen))
    expect = 100 * sum(diffs) / len(diffs)
    assert f"{expect:+.1f} [" in line.split(": ", 1)[1].split(" at seen")[0]
    assert f"at {max(seen)}," in line and line.endswith("unseen")


@pytest.mark.slow
def test_the_lab_steps_figure_comes_from_the_studys_files(study, tmp_path):
    import importlib.util

    _, root, report, _ = study
    path = Path(__file__).resolve().parents[1] / "scripts" / "lab_figures.py"
    spec = importlib.util.spec_from_file_location("lab_figures_tuned", path)
    lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab)
    (tmp_path / "tuned").symlink_to(root)  # the walkthrough's folder layout: lab/tuned
    figure = lab.fair_figure(tmp_path)
    assert "fair" in lab.FIGURES
    for reader in ("fixed", "attention"):
        expected = unbiased(trials(root, reader).value.tolist())
        row = next(ln for ln in figure.splitlines() if ln.startswith(f"| {reader} |"))
        cells = [c.split(" [")[0] for c in row.strip("|").split("|")[1:]]
        want = [lab.pct(expected[n - 1]) for n in (1, TRIALS // 2, TRIALS)]
        assert [c.strip() for c in cells] == want
    said = [ln for ln in report.stdout.splitlines() if "curves" in ln or "equal tuning" in ln]
    assert len(said) == 2
    for line in said:  # the report's own lines, as sentences
        assert f"{line[0].upper()}{line[1:]}." in figure


@pytest.mark.slow
def test_the_same_command_resumes_a_stopped_study(study, attnlab_run):
    # Stopped before the study's end: no trials.csv yet. Asked again, the seeded sampler draws
    # the same trials, each finds its run complete (nothing trains), and the re-runs are kept.
    res, root, _, _ = study
    before = trials(root, "fixed")
    checkpoints = {p: p.stat().st_mtime_ns for p in (root / "study").rglob("*.pt")}
    (root / "study" / "fixed" / "trials.csv").unlink()
    again = attnlab_run(
        "sweep", "tuned", "model=fixed,attention", f"tune.trials={TRIALS}",
        f"tune.seeds={SEEDS}", *BUDGET, *AXES, f"hydra.sweep.dir={root}", cwd=root.parent,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    pd.testing.assert_frame_equal(trials(root, "fixed"), before)
    assert {p: p.stat().st_mtime_ns for p in checkpoints} == checkpoints  # none trained again
    assert f"model=attention: study complete in {root / 'study' / 'attention'}" in again.stdout
    for reader in ("fixed", "attention"):
        assert f"model={reader}: best trial's re-runs complete" in again.stdout


def test_a_study_without_its_trials_is_unreadable_in_one_line(tmp_path):
    from attnlab.report.tuned_study import StudyUnreadable, read_study

    manifest = {"readers": ["fixed", "attention"], "objective": "val_exact", "trials": 4,
                "sampler": "random", "studies": {"fixed": "study/fixed",
                "attention": "study/attention"}, "winners": {}}  # fmt: skip
    (tmp_path / "tuned.json").write_text(json.dumps(manifest))
    with pytest.raises(StudyUnreadable, match=r"unreadable \(FileNotFoundError: .*trials.csv"):
        read_study(tmp_path)


def test_a_reader_without_any_axis_and_a_plain_sweep_folder_are_refused(attnlab_run, tmp_path):
    base = ["model=fixed,attention", *BUDGET]
    res = attnlab_run(
        "sweep", "tuned", *base, AXES[1], f"hydra.sweep.dir={tmp_path / 'a'}", cwd=tmp_path
    )
    assert "model=fixed has none of the search axes (model.attn_dim)" in error_line(res)
    plain = tmp_path / "plain"
    (plain / "0").mkdir(parents=True)  # what attnlab sweep lengths leaves
    res = attnlab_run("sweep", "tuned", *base, AXES[0], f"hydra.sweep.dir={plain}", cwd=tmp_path)
    assert "holds 0 but no tuned.json: not a study of attnlab sweep tuned" in error_line(res)
    assert sorted(p.name for p in plain.iterdir()) == ["0"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, said",
    [
        (["tune.steps=3"], "tune.steps null there, 3 here; steps per trial 6 there, 3 here"),
        (["tune.minutes=0.5"], "minutes per trial and re-run (tune.minutes) null there, 0.5 here"),
        (
            ["model=fixed,attention,ctc"],
            "readers (model=) attention,fixed there, attention,ctc,fixed here",
        ),
        (
            ["optim.lr=interval(0.001,0.1)"],
            "search space optim.lr=interval(0.001,0.05) there, optim.lr=interval(0.001,0.1) here",
        ),
    ],
)
def test_a_second_study_with_other_settings_is_refused(study, attnlab_run, change, said):
    _, root, _, _ = study
    before = (root / "tuned.json").read_bytes()
    keys = {c.split("=", 1)[0] for c in change}
    args = [
        "model=fixed,attention",
        f"tune.trials={TRIALS}",
        f"tune.seeds={SEEDS}",
        *BUDGET,
        *AXES,
        f"hydra.sweep.dir={root}",
    ]
    args = [a for a in args if a.split("=", 1)[0] not in keys] + change
    res = attnlab_run("sweep", "tuned", *args, cwd=root.parent)
    assert said in error_line(res)
    assert (root / "tuned.json").read_bytes() == before


@pytest.mark.slow
def test_the_section_names_the_search_and_whether_it_was_done(study):
    _, root, report, _ = study
    said = report.stdout
    assert (
        "search space: optim.lr=interval(0.001,0.05), model.attn_dim=choice(8,16) "
        f"(attention only); 6 steps per trial; {TRIALS} trials per reader"
    ) in said
    best = json.loads((root / "tuned.json").read_text())["best"]["attention"]
    dim = next(o for o in best["overrides"] if o.startswith("model.attn_dim="))
    edge = "bottom" if dim.endswith("=8") else "top"  # choice(8,16): always at an edge
    assert f"attention's best trial has {dim}, at the {edge} edge of the searched 8..16" in said
    for reader in ("fixed", "attention"):
        rising = 0
        for d in trials(root, reader).dir:
            h = pd.read_csv(root / "study" / reader / d / "history.csv")
            vals = h["val_exact_acc"].dropna().tolist()
            rising += len(vals) >= 2 and vals[-1] > max(vals[:-1])
        line = f"{reader}: {rising} of its {TRIALS} trials were still improving"
        assert (line in said) == (rising > 0)


@pytest.mark.slow
def test_edited_and_missing_study_files_are_named(study, attnlab_run, tmp_path):
    import shutil

    from attnlab.report.expected_max import unbiased as ub

    _, root, _, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    table = copy / "study" / "fixed" / "trials.csv"
    t = pd.read_csv(table, dtype={"dir": str})
    truth = t.value.tolist()
    t.loc[1, "value"] = 0.99
    t.to_csv(table, index=False)
    shutil.rmtree(copy / "study" / "attention" / trials(copy, "attention").dir[3])
    res = attnlab_run("report", str(copy), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (
        "study/fixed/trials.csv: edited after the study wrote it (not the sha256 tuned.json "
        "records): trial 1 0.99 there"
    ) in res.stdout
    assert "study/attention/trials.csv: trial folder(s) 3 are gone (deleted?)" in res.stdout
    frame = pd.read_csv(tmp_path / "r" / "expected_max.csv")
    rows = frame[(frame.variant == "fixed") & (frame.estimator == "unbiased")]
    assert rows.expected.tolist() == pytest.approx(ub(truth))  # not the edited 0.99
    (copy / "tuned.json").unlink()
    res = attnlab_run("report", str(copy), "--out", str(tmp_path / "r2"), cwd=tmp_path)
    assert f"study {copy}: no tuned.json (deleted?)" in res.stderr
    assert not (tmp_path / "r2" / "expected_max.csv").exists()


@pytest.mark.slow
def test_ctrl_c_prints_the_command_that_resumes_the_study(tmp_path, cli_env):
    import os
    import signal
    import subprocess
    import sys
    import time

    root = tmp_path / "study"
    args = [
        "model=fixed,attention",
        "tune.trials=2",
        "tune.seeds=1",
        *BUDGET[:-4],
        "train.steps=100000",
        "train.val_every=50000",
        *AXES,
        f"hydra.sweep.dir={root}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnlab.cli", "sweep", "tuned", *args],
        cwd=tmp_path,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        # SIGINT's default action, as in a terminal: started from a non-interactive shell with
        # `&` (a CI script), pytest would hand the study SIGINT ignored (before attnlab.cli.run
        # put the handler back, 3 of 3 Ctrl-Cs were lost so)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not list(root.glob("study/fixed/0/history.csv")) and time.monotonic() < deadline:
        if list(root.glob("study/fixed/0/.hydra/config.yaml")):
            time.sleep(2)
            break
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    line = next(ln for ln in out.splitlines() if "stopped (Ctrl-C); resume with:" in ln)
    assert line.endswith(f"hydra.sweep.dir={root}")
    assert "attnlab sweep tuned model=fixed,attention tune.trials=2" in line


# --- equal minutes (issue #59): tune.minutes for every trial and re-run -----------------------

MINUTES = 0.025  # 1.5 s of training a run: the numbers mean nothing, the budgets are tested
BY_MINUTES = [*(a for a in BUDGET if not a.startswith(("train.steps=", "train.val_every="))),
              "train.steps=100000", "train.val_every=10", f"tune.minutes={MINUTES}"]  # fmt: skip


@pytest.fixture(scope="module")
def minutes_study(tmp_path_factory, attnlab_run):
    cwd = tmp_path_factory.mktemp("tuned_minutes")
    root = cwd / "study"
    res = attnlab_run(
        "sweep", "tuned", "model=fixed,attention", "tune.trials=2", f"tune.seeds={SEEDS}",
        *BY_MINUTES, AXES[0], f"hydra.sweep.dir={root}", cwd=cwd,
    )  # fmt: skip
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    report = attnlab_run("report", str(root), "--out", str(cwd / "report"), cwd=cwd)
    assert report.returncode == 0, report.stderr[-3000:]
    return res, root, report, cwd / "report"


def _runs(root: Path, reader: str) -> dict[str, list[Path]]:
    return {
        "trials": [root / "study" / reader / d for d in trials(root, reader).dir],
        "re-runs": sorted(p.parent for p in (root / "winners" / reader).glob("*/metrics.json")),
    }


@pytest.mark.slow
def test_every_trial_and_re_run_trains_to_the_same_minutes(minutes_study):
    res, root, _, _ = minutes_study
    assert f"trials of {MINUTES:g} minutes or 100000 steps, whichever ends first" in res.stdout
    assert json.loads((root / "tuned.json").read_text())["minutes"] == MINUTES
    for reader in ("fixed", "attention"):
        runs = _runs(root, reader)
        assert len(runs["trials"]) == 2 and len(runs["re-runs"]) == SEEDS
        for run in runs["trials"] + runs["re-runs"]:
            assert config(run)["train"]["minutes"] == MINUTES
            budget = json.loads((run / "metrics.json").read_text())["budget"]
            assert budget["minutes"] == MINUTES and budget["ended_by"] == "minutes"
            assert 0 < budget["steps_taken"] < 100000
            # history.csv: the training seconds at each validation, in order, within the run's
            h = pd.read_csv(run / "history.csv").dropna(subset=["val_exact_acc"])
            seconds = h["train_seconds"].tolist()
            assert len(seconds) >= 2 and seconds == sorted(seconds)
            assert seconds[-1] <= 60 * (budget["minutes_spent"] + 1e-4)  # 4 places recorded
        launched = yaml.safe_load((root / "winners" / reader / "multirun.yaml").read_text())
        assert launched["hydra"]["launcher"]["_target_"].endswith("BasicLauncher")  # one at a time


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, said",
    [
        ([f"tune.minutes={2 * MINUTES:g}"], f"(tune.minutes) {MINUTES:g} there, {2 * MINUTES:g}"),
        ([], f"minutes per trial and re-run (tune.minutes) {MINUTES:g} there, null here"),
    ],
)
def test_a_second_study_with_other_minutes_is_refused(minutes_study, attnlab_run, change, said):
    _, root, _, _ = minutes_study
    before = (root / "tuned.json").read_bytes()
    args = [a for a in BY_MINUTES if not a.startswith("tune.minutes=")] + change
    res = attnlab_run(
        "sweep", "tuned", "model=fixed,attention", "tune.trials=2", f"tune.seeds={SEEDS}",
        *args, AXES[0], f"hydra.sweep.dir={root}", cwd=root.parent,
    )  # fmt: skip
    assert said in error_line(res)
    assert (root / "tuned.json").read_bytes() == before


def _budgets(runs: list[Path]) -> list[dict]:
    return [json.loads((r / "metrics.json").read_text())["budget"] for r in runs]


@pytest.mark.slow
def test_the_report_states_the_budget_in_minutes_beside_the_steps(minutes_study):
    import statistics

    _, root, report, out = minutes_study
    said = report.stdout
    assert (
        f"search space: {AXES[0]}; {MINUTES:g} minutes per trial (at most 100000 steps); "
        "2 trials per reader"
    ) in said
    # What each reader's re-runs took in steps at those minutes, from their metrics.json
    steps = {
        r: statistics.median(b["steps_taken"] for b in _budgets(_runs(root, r)["re-runs"]))
        for r in ("attention", "fixed")
    }
    line = next(ln for ln in said.splitlines() if "after equal tuning" in ln)
    assert line.startswith(
        f"attention − fixed after equal tuning at {MINUTES:g} minutes a run (attention "
        f"{steps['attention']:.0f} steps, fixed {steps['fixed']:.0f}; exact-string accuracy, "
        f"points, 95% paired interval, {SEEDS} seed pair(s)"
    )
    assert " at seen, " in line and line.endswith("unseen")
    spent = next(ln for ln in said.splitlines() if ln.startswith("what they spent"))
    trial_steps = sorted(b["steps_taken"] for b in _budgets(_runs(root, "fixed")["trials"]))
    lo, hi = trial_steps[0], trial_steps[-1]  # a range only where the trials' steps differ
    said_range = f" [{lo}-{hi}]" if lo != hi else ""
    assert f"trials: fixed {statistics.median(trial_steps):.0f}{said_range}" in spent
    assert "; re-runs: " in spent and " minutes" in spent
    summary = (out / "summary.md").read_text()
    assert f"({root}): {MINUTES:g} minutes per trial (at most 100000 steps)" in summary
    assert line in summary
    # the curves against minutes, with the budget said beside them
    assert (out / "training_1_3_minutes.png").is_file()
    assert f"trained to a budget in minutes (train.minutes={MINUTES:g})" in summary


@pytest.mark.slow
def test_equal_steps_and_equal_minutes_stand_side_by_side(study, minutes_study, attnlab_run):
    _, steps_root, _, _ = study
    _, minutes_root, _, _ = minutes_study
    out = minutes_root.parent / "both"
    res = attnlab_run(
        "report", str(steps_root), str(minutes_root), "--out", str(out), cwd=out.parent
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [ln for ln in res.stdout.splitlines() if "after equal tuning" in ln]
    assert len(lines) == 2
    by_steps = next(ln for ln in lines if " at 6 steps a run (attention " in ln)
    by_minutes = next(ln for ln in lines if f" at {MINUTES:g} minutes a run (attention " in ln)
    summary = (out / "summary.md").read_text()
    side = summary.split("## Equal tuning budgets side by side", 1)[1]
    assert f"- {steps_root} (6 steps per trial): {by_steps}" in side
    assert f"- {minutes_root} ({MINUTES:g} minutes per trial (at most 100000 steps)): " in side
    assert by_minutes in side
    assert 'id="tuned-side-by-side"' in (out / "index.html").read_text()
