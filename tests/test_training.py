"""`attnlab train` end to end: the run directory, resume after a kill, checkpoint errors."""

import json
import math

import pytest
import torch

TINY = ["preset=tiny", "train.progress=plain"]


def test_train_writes_a_complete_run_directory(trained):
    run = trained["attention"]
    for name in [
        ".hydra/config.yaml", "checkpoints/last.pt", "checkpoints/best.pt", "train.log",
        "metrics.json", "history.csv", "status.json",
    ]:  # fmt: skip
        assert (run / name).is_file(), name
    assert list((run / "tb").glob("events.out.tfevents.*"))
    log = (run / "train.log").read_text()
    assert "parameters" in log and "truth | reading | confidence" in log
    assert "step 0 validation" in log
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["step"] == 30 and metrics["reader"] == "attention"
    assert set(metrics["val"]["by_length"]) == {"1", "2", "3"}
    assert json.loads((run / "status.json").read_text())["state"] == "complete"
    # Checkpoints are plain: they load without unpickling code.
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["step"] == 30 and ckpt["config"]["model"]["name"] == "attention"
    assert {"model", "optimizer", "scheduler", "rng", "config"} <= set(ckpt)
    history = (run / "history.csv").read_text().splitlines()
    assert history[0] == "step,loss,lr,val_exact_acc,val_cer,train_seconds" and len(history) > 6


def test_a_killed_run_resumes_to_the_same_numbers(tmp_path, killed_and_resumed):
    args = [*TINY, "train.steps=60", "train.checkpoint_every=10", "train.val_every=20"]
    whole, cut, killed_at = killed_and_resumed(args, tmp_path)
    assert 0 < killed_at < 60
    log = (cut / "train.log").read_text()
    assert f"resumed from {cut / 'checkpoints' / 'last.pt'} at step {killed_at}" in log


def test_checkpoint_errors_are_one_clear_line(
    tmp_path, attnlab_cli, attnlab_run, trained, copy_run
):
    run = copy_run(trained["attention"])

    # A checkpoint from another reader in the same run directory (in-process: the message is
    # tested; the truncated checkpoint below runs in a real process, where nothing torch
    # writes to the stderr file descriptor itself can slip past the one line).
    res = attnlab_run("train", *TINY, "model=fixed", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "another model config" in res.stderr

    # A truncated checkpoint.
    data = (run / "checkpoints" / "last.pt").read_bytes()
    bad = tmp_path / "truncated.pt"
    bad.write_bytes(data[: len(data) // 2])
    res = attnlab_cli("eval", bad, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("attnlab: error:") and "truncated.pt" in res.stderr
    assert "not a readable attnlab checkpoint" in res.stderr and "Traceback" not in res.stderr

    # Not a run at all.
    res = attnlab_run("eval", tmp_path / "nowhere", cwd=tmp_path)
    assert res.returncode == 2 and "nowhere" in res.stderr


@pytest.mark.slow
def test_a_non_finite_loss_stops_with_a_clear_error(tmp_path, attnlab_run):
    run = tmp_path / "run"
    res = attnlab_run(
        "train", *TINY, "optim.lr=1e30", "optim.warmup_steps=0", "optim.grad_clip=1e30",
        f"hydra.run.dir={run}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "non-finite loss" in res.stderr and res.stderr.count("\n") == 1
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and "non-finite" in status["error"]


def test_batch_by_length_reaches_the_training_stream(tmp_path):
    from helpers.readers import tiny_config

    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    trainer = Trainer(tiny_config("attention", "data.batch_by_length=true"), RunDir(tmp_path))
    assert trainer.stream.by_length
    batches = [trainer.stream.next() for _ in range(12)]
    assert all(len({len(s) for s in b.labels}) == 1 for b in batches)
    assert len({len(b.labels[0]) for b in batches}) > 1  # the length changes batch to batch
    assert all(math.isfinite(trainer.train_step()) for _ in range(3))
    mixed = Trainer(tiny_config("attention"), RunDir(tmp_path / "mixed"))
    assert not mixed.stream.by_length  # the default: lengths mixed in every batch


def test_a_job_stopped_before_its_first_step_is_interrupted_and_a_refused_one_failed(tmp_path):
    """A sweep job that ends while it is being set up: a SIGTERM or Ctrl-C there is no
    failure (running the sweep again starts it), a refusal is."""
    from attnlab.runs.rundir import RunDir, RunStatus
    from attnlab.runtime import Interrupted
    from attnlab.training.session import _refused_or_stopped

    cases = [
        (Interrupted(), RunStatus.interrupted, "interrupted (SIGTERM)"),
        (KeyboardInterrupt(), RunStatus.interrupted, "interrupted (Ctrl-C)"),
        (ValueError("model.hidden=0: must be >= 1"), RunStatus.failed,
         "ValueError: model.hidden=0: must be >= 1"),
    ]  # fmt: skip
    for i, (err, state, reason) in enumerate(cases):
        run = RunDir(tmp_path / str(i))
        run.path.mkdir()
        _refused_or_stopped(run, err, fresh=True)
        status = run.read_status()
        assert (status.state, status.step, status.error) == (state, 0, reason)
    kept = RunDir(tmp_path / "kept")  # a run that was there keeps its own status
    kept.path.mkdir()
    _refused_or_stopped(kept, Interrupted(), fresh=False)
    assert not kept.status_file.exists()
