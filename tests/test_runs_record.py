"""A run's record never changes under it (issue 32): a command that would compute another run
is refused, a finished run asked again is left as it was, Ctrl-C and SIGTERM save a whole
step that resumes to the same run, every interrupted run says the command that resumes it,
and init_from maps the vocabulary's rows by character."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import TINY
from helpers.runs import history_cells

ATTENTION = [*TINY, "model=attention"]  # the session's trained["attention"] run


def files(run: Path, skip: tuple[str, ...] = (".lock",)) -> dict[str, bytes]:
    """Every file of a run (bytes), but the lock (its holder's line changes)."""
    return {
        str(p.relative_to(run)): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def one_line(res: subprocess.CompletedProcess[str], *named: str) -> None:
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    for text in named:
        assert text in res.stderr, res.stderr


def shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` as printed, run by bash, with this interpreter's ``attnlab`` first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env={**env, "PATH": path},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def stop_at(args: list[str], cwd: Path, env: dict[str, str], log: Path, sig: int) -> str:
    """Start ``attnlab ARGS``, send ``sig`` once ``log`` shows training step 5 (before the
    first checkpoint of train.checkpoint_every=1000); its output once it has ended."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnlab.cli", *args], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.time() + 180
    while proc.poll() is None and not (log.exists() and "step 5/30" in log.read_text()):
        assert time.time() < deadline
        time.sleep(0.005)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode != 0, f"it ended before the signal came:\n{out}"
    return out


def resume_line(out: str) -> str:
    line = next(ln for ln in out.splitlines() if "resume with: " in ln or "resume the sweep" in ln)
    return line.split("with: ", 1)[1]


def same_run(a: Path, b: Path) -> None:
    """Same validation metrics, weights and history: the property of killed_and_resumed."""
    ma, mb = (json.loads((r / "metrics.json").read_text()) for r in (a, b))
    assert ma["val"] == mb["val"] and ma["best"] == mb["best"] and ma["step"] == mb["step"]
    wa, wb = (torch.load(r / "checkpoints" / "last.pt", weights_only=True) for r in (a, b))
    for key, value in wa["model"].items():
        assert torch.equal(value, wb["model"][key]), key
    assert history_cells(a) == history_cells(b)  # train_seconds follows the clock


# --- item 7: a command that computes another run is refused; the record stays ----------------


@pytest.mark.slow
def test_a_command_that_computes_another_run_is_refused_and_leaves_it_as_it_was(
    trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    config = (run / ".hydra" / "config.yaml").read_bytes()
    before = files(run, skip=(".lock", "train.log"))  # the log says what was refused
    for override, named in (
        ("seed=5", "another config (seed=0; this command: seed=5)"),
        ("optim.lr=0.001", "another optim config (optim.lr=0.006; this command: optim.lr=0.001)"),
    ):
        res = attnlab_run("train", *ATTENTION, override, f"hydra.run.dir={run}", cwd=tmp_path)
        one_line(res, named)
        assert (run / ".hydra" / "config.yaml").read_bytes() == config
        assert files(run, skip=(".lock", "train.log")) == before
    assert json.loads((run / "status.json").read_text())["state"] == "complete"


def test_the_refusal_names_the_key_and_only_declared_keys_may_change():
    from attnlab.config.keys import NEUTRAL_KEYS, RESUMABLE
    from attnlab.errors import UserError
    from attnlab.report import variants
    from attnlab.runs.resume import check_same_config

    saved = {"seed": 0, "data": {"charset": "0123456789"}, "train": {"steps": 30, "threads": 2}}
    more = {"seed": 0, "data": {"charset": "0123456789"}, "train": {"steps": 90, "threads": 1}}
    check_same_config(saved, more, Path("last.pt"))  # more steps, other threads: a resume
    other = {**saved, "data": {"charset": "9876543210"}}
    with pytest.raises(UserError) as err:
        check_same_config(saved, other, Path("last.pt"))
    assert 'another data config (data.charset="0123456789"; this command: ' in str(err.value)
    assert 'data.charset="9876543210")' in str(err.value)
    with pytest.raises(UserError, match=r"\(init_from=null; this command: init_from=\"src\"\)"):
        check_same_config({**saved, "init_from": None}, {**saved, "init_from": "src"}, Path("x"))
    # one declared list: what the report ignores is the seed and these keys
    assert variants.IGNORED_KEYS == ("seed", *NEUTRAL_KEYS)
    resumable = {"train.steps", "train.patience", "train.minutes", "train.rounds"}
    assert set(RESUMABLE) - set(NEUTRAL_KEYS) == resumable


@pytest.mark.slow
def test_a_finished_run_asked_again_stays_exactly_as_it_was(
    trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    before = files(run)
    res = attnlab_run("train", *ATTENTION, f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "nothing to train" in res.stdout + res.stderr
    after = files(run)
    assert sorted(after) == sorted(before)  # no new TensorBoard file, no job log
    assert [name for name in before if before[name] != after[name]] == []


# --- saving on interrupt, and the command that resumes --------------------------------------


@pytest.mark.slow
def test_sigterm_before_the_first_checkpoint_saves_a_step_that_resumes_to_the_same_run(
    trained, cli_env, tmp_path
):
    from attnlab.report import discover_runs
    from attnlab.runs.resume import hydra_value

    cut = tmp_path / "cut run"  # a space: the printed command quotes it for the shell
    args = ["train", *ATTENTION, "train.checkpoint_every=1000", f"hydra.run.dir={hydra_value(cut)}"]
    out = stop_at(args, tmp_path, cli_env, cut / "train.log", signal.SIGTERM)
    status = json.loads((cut / "status.json").read_text())
    ckpt = torch.load(cut / "checkpoints" / "last.pt", weights_only=True)
    assert status["state"] == "interrupted" and 5 <= status["step"] < 30
    assert ckpt["step"] == status["step"]  # saved at the step it stopped, a whole step:
    assert {int(s["step"]) for s in ckpt["optimizer"]["state"].values()} == {ckpt["step"]}
    command = resume_line(out)
    assert command.endswith(f"""'hydra.run.dir="{cut}"'""")
    (info,) = discover_runs([cut])
    assert info.problems[0].endswith(f"; resumable from last.pt: {command}")
    res = shell(command, tmp_path, cli_env)  # train.checkpoint_every differs: allowed
    assert res.returncode == 0, res.stderr
    assert (
        f"resumed from {cut / 'checkpoints' / 'last.pt'} at step {ckpt['step']}"
        in (cut / "train.log").read_text()
    )
    same_run(trained["attention"], cut)


def stopped_in_third_step(run: Path, signum: int, ends: type[BaseException]) -> None:
    """Train in-process, send ``signum`` in the third step before its backward pass, and
    check that the run ends with ``ends`` and last.pt holds that whole step."""
    from helpers.readers import tiny_config

    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    trainer = Trainer(tiny_config("attention"), RunDir(run))
    loss = trainer.loss_fn

    def interrupted_loss(*args):
        if trainer.step == 2:
            signal.raise_signal(signum)
        return loss(*args)

    trainer.loss_fn = interrupted_loss
    with pytest.raises(ends):
        trainer.run()
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["step"] == 3 and trainer.step == 3
    assert {int(s["step"]) for s in ckpt["optimizer"]["state"].values()} == {3}
    for key, value in trainer.model.state_dict().items():
        assert torch.equal(value, ckpt["model"][key]), key


@pytest.mark.slow
def test_ctrl_c_inside_a_step_saves_that_step_once_it_is_whole(tmp_path):
    # Python's own handler, as in a terminal: a suite started in the background (`make test &`
    # from a script) inherits SIGINT ignored, and the signal would never arrive.
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        stopped_in_third_step(tmp_path, signal.SIGINT, KeyboardInterrupt)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, outside)


@pytest.mark.slow
def test_under_submitit_its_requeue_handler_runs_once_the_step_is_saved(tmp_path, monkeypatch):
    """submitit's own handler of its preemption signal (USR2) requeues the job and exits; it
    runs after last.pt holds the step (SIGTERM is submitit's to log, not ours)."""
    calls = []

    def requeue(signum, frame):  # as submitit's checkpoint_and_try_requeue ends
        calls.append((signum, (tmp_path / "checkpoints" / "last.pt").is_file()))
        sys.exit(-1)

    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    previous = signal.signal(signal.SIGUSR2, requeue)
    try:
        stopped_in_third_step(tmp_path, signal.SIGUSR2, SystemExit)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert calls == [(signal.SIGUSR2, True)]


@pytest.mark.slow
def test_an_interrupted_sweep_says_the_command_that_resumes_it(cli_env, tmp_path):
    from attnlab.runs.resume import hydra_value
    from attnlab.tasks.sweep import report_sweeps

    sweep = tmp_path / "my sweep"
    started = time.time()
    args = [
        "-m",
        *ATTENTION,
        "train.checkpoint_every=1000",
        f"hydra.sweep.dir={hydra_value(sweep)}",
    ]
    stop_at(["train", *args], tmp_path, cli_env, sweep / "0" / "train.log", signal.SIGTERM)
    lines: list[str] = []
    assert report_sweeps(args, started, lines.append)
    assert f"  interrupted {sweep / '0'}: interrupted (SIGTERM)" in lines  # not FAILED
    assert not [ln for ln in lines if "FAILED" in ln]
    command = resume_line("\n".join(lines))
    assert shlex.split(command)[:3] == ["attnlab", "train", "-m"]
    assert command.endswith(f"""'hydra.sweep.dir="{sweep}"'""")
    res = shell(command, tmp_path, cli_env)
    assert res.returncode == 0, res.stderr
    assert json.loads((sweep / "0" / "status.json").read_text())["state"] == "complete"


# --- item 4: init_from of another charset ---------------------------------------------------


def source_with_charset(run: Path, charset: str, dest: Path, nan: str | None = None) -> Path:
    """The run's best.pt as if trained on ``charset`` (optionally a NaN in tensor ``nan``)."""
    from attnlab.runs import checkpoint

    ckpt = checkpoint.load(run / "checkpoints" / "best.pt")
    ckpt.config["data"]["charset"] = charset
    if nan is not None:
        ckpt.model[nan][0] = float("nan")
    return ckpt.save(dest)


def test_init_from_another_charset_maps_the_vocabulary_rows_by_character(trained, tmp_path):
    from helpers.readers import tiny_config

    from attnlab.models import registry
    from attnlab.training.finetune import init_from

    src = source_with_charset(trained["attention"], "9876543210", tmp_path / "reversed.pt")
    saved = torch.load(src, weights_only=True)["model"]
    for charset in ("0123456789", "0123456789ab"):  # the default; two characters more
        cfg = tiny_config("attention", f"data.charset={charset}")
        torch.manual_seed(0)
        model = registry.build(cfg.model, cfg.data.height, cfg.data.charset)
        fresh = {k: v.clone() for k, v in model.state_dict().items()}
        record = init_from(model, cfg, str(src))
        got = model.state_dict()
        assert record["mapped_by_character"] == ["embed.weight", "out.bias", "out.weight"]
        assert record["reinitialised"] == [] and record["new_characters"] == charset[10:]
        for key in record["mapped_by_character"]:
            assert torch.equal(got[key][:3], saved[key][:3])  # PAD, BOS, EOS
            for i, c in enumerate("0123456789"):  # '0' is row 3 here, row 12 in the source
                assert torch.equal(got[key][3 + i], saved[key][3 + "9876543210".index(c)])
            assert torch.equal(got[key][13:], fresh[key][13:])  # 'a', 'b': as initialised
        assert torch.equal(got["attention.key.weight"], saved["attention.key.weight"])


def test_non_finite_weights_in_init_from_are_named_as_such(trained, attnlab_run, tmp_path):
    bad = source_with_charset(trained["attention"], "0123456789", tmp_path / "bad.pt", "out.bias")
    run = tmp_path / "tuned"
    res = attnlab_run("train", *ATTENTION, f"init_from={bad}", f"hydra.run.dir={run}", cwd=tmp_path)
    one_line(res, "non-finite weights (out.bias: 1 of 13 values NaN or infinite)", str(bad))
    assert "optim.lr" not in res.stderr and files(run) == {}
