"""What preset=gpu turns on, run on a CPU: bf16 autocast on the run's device type,
torch.compile (inductor), batches of 1,024, and the config checks of preset=gpu."""

from __future__ import annotations

import contextlib
import math
import os
import shutil

import pytest
import torch

from attnlab.config import EvalConfig, check_experiment
from attnlab.data.strips import StripSynth, fixed_set
from attnlab.errors import UserError
from attnlab.evaluation.inference import read_strips
from attnlab.models.host import compile_loss
from attnlab.runs.rundir import RunDir
from attnlab.runtime import resolve_device
from attnlab.tasks.compose import compose
from attnlab.training.trainer import Trainer

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1", "train.device=cpu"]


@contextlib.contextmanager
def output_dtypes():
    """The dtypes of every Linear layer's output while the block runs."""
    seen: set[torch.dtype] = set()

    def hook(module, args, out):
        if isinstance(module, torch.nn.Linear):
            seen.add(out.dtype)

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def test_default_cpu_run_has_no_autocast(tmp_path):
    trainer = Trainer(compose([*TINY, "model=attention"]), RunDir(tmp_path))
    assert trainer.autocast is False
    with output_dtypes() as seen:
        trainer.advance()
    assert seen == {torch.float32}


@pytest.mark.slow
def test_bf16_on_cpu_trains_validates_and_evaluates_under_autocast(tmp_path):
    from attnlab.evaluation.evaluate import evaluate_run

    cfg = compose([*TINY, "model=attention", "train.bf16=true", "train.steps=4"])
    trainer = Trainer(cfg, RunDir(tmp_path / "run"))
    assert trainer.autocast is True
    with output_dtypes() as seen:
        loss = trainer.advance()
    assert math.isfinite(loss) and torch.bfloat16 in seen
    with output_dtypes() as seen:
        val = trainer.validate()
    assert torch.bfloat16 in seen and 0 <= val["exact_acc"] <= 1
    trainer.run()  # the whole run: validations, checkpoints
    with output_dtypes() as seen:
        out = evaluate_run(
            tmp_path / "run", EvalConfig(n=4, n_boot=10, maps_k=1, explore_n=0), "best", "cpu",
            say=lambda *_: None,
        )  # fmt: skip
    assert torch.bfloat16 in seen and (out / "metrics_by_length.csv").is_file()


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("ATTNLAB_COMPILE_TEST"),
    reason="ATTNLAB_COMPILE_TEST=1 runs it: inductor compiles C++ for minutes on 2 CPU cores",
)
def test_compile_gives_the_same_loss_curve():
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("torch.compile's inductor needs a C++ compiler (gcc) on CPU")
    curves = {}
    for compiled in (False, True):
        # One label length: the compiled graph is not recompiled for each (widths are dynamic).
        over = ["model=fixed", "data.train_lengths=[3,3]", f"train.compile={compiled}".lower()]
        cfg = compose([*TINY, *over])
        trainer = Trainer(cfg, RunDir("/nonexistent-compile-run"))
        curves[compiled] = [trainer.advance() for _ in range(3)]
    assert curves[True] == pytest.approx(curves[False], rel=1e-4, abs=1e-5)
    assert curves[False][0] != curves[False][-1]  # it trained: the loss moved
    assert not label_guards()  # each batch's labels did not compile the loss again


def label_guards() -> list[str]:
    """The guards on label strings that failed in this process's compiled frames: each one
    a recompilation because a batch brought other labels."""
    from torch._dynamo.utils import guard_failures

    return [r for reasons in guard_failures.values() for r in reasons if "labels[" in r]


@pytest.mark.parametrize("model", ["ctc", "attention"])  # the CTC and the step-wise losses
def test_a_compiled_loss_is_not_compiled_again_for_other_labels(model):
    """train.compile compiles ``model.loss(images, widths, labels)`` (``compile_loss``). The
    label strings are made into tensors outside the graph (``attnlab.models.host``): traced,
    every string became a guard, so each batch with other labels compiled the loss again,
    until torch gave up and ran it uncompiled. Traced here without inductor
    (``backend="eager"``: dynamo's guards are the same)."""
    torch._dynamo.reset()
    cfg = compose([*TINY, f"model={model}"])
    trainer = Trainer(cfg, RunDir("/nonexistent-guard-run"))
    loss = compile_loss(trainer.model.loss, backend="eager")
    for labels in (["12", "345"], ["67", "890"], ["1", "2345"]):
        images = torch.rand(2, cfg.data.height, 64)
        loss(images, torch.tensor([64, 60]), labels).backward()
    assert not label_guards()


def test_a_loss_torch_cannot_compile_trains_uncompiled_after_one_warning(caplog):
    """Inductor fails on some readers (the VGG encoder with dynamic shapes, torch 2.13): the
    run then trains uncompiled, with one warning line naming why, instead of ending. Here a
    backend that always fails stands for it."""

    def failing(graph, example_inputs):
        raise RuntimeError("no compiler for this graph")

    torch._dynamo.reset()
    cfg = compose([*TINY, "model=ctc"])
    model = Trainer(cfg, RunDir("/nonexistent-fallback-run")).model
    loss = compile_loss(model.loss, backend=failing)
    images, widths = torch.rand(2, cfg.data.height, 64), torch.tensor([64, 60])
    with caplog.at_level("WARNING", logger="attnlab.train"):
        got = [loss(images, widths, labels) for labels in (["12", "345"], ["67", "890"])]
    assert loss.failed is not None and "no compiler for this graph" in loss.failed
    warned = [r.getMessage() for r in caplog.records if "train.compile" in r.getMessage()]
    assert len(warned) == 1 and "trains uncompiled" in warned[0], warned
    assert float(got[1]) == float(model.loss(images, widths, ["67", "890"]))


@pytest.mark.slow
def test_batches_of_1024_train_and_read_on_cpu():
    cfg = compose([*TINY, "model=attention", "train.batch_size=1024", "eval.batch_size=1024"])
    trainer = Trainer(cfg, RunDir("/nonexistent-big-batch-run"))
    losses = [trainer.advance(), trainer.advance()]
    assert all(math.isfinite(x) for x in losses)
    strips = fixed_set(StripSynth(cfg.data), "test", 2, 1030)  # two batches: 1,024 and 6
    r = read_strips(trainer.model, strips, trainer.device, cfg.eval.batch_size)
    assert len(r.texts) == 1030 and all(len(t) <= 8 for t in r.texts)


def test_preset_gpu_composes_and_passes_the_checks_on_cpu():
    cfg = compose(["preset=gpu"])
    check_experiment(cfg)  # no error: every value is valid
    assert cfg.train.batch_size == 1024 and cfg.eval.batch_size == 1024
    assert cfg.train.device == "cuda" and cfg.train.bf16 is None  # bf16 on CUDA


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_gpu_is_one_line(attnlab_cli, tmp_path):
    with pytest.raises(UserError, match="no CUDA GPU is available here"):
        resolve_device("cuda")
    res = attnlab_cli("train", "preset=gpu", "train.steps=1", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == ["attnlab: error: device: 'cuda' asked for, but no CUDA GPU is available here"]
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("*.pt"))


@pytest.mark.parametrize(("written", "saved", "read"), [(7, True, None), (8, True, True)])
def test_older_checkpoints_bf16_true_meant_cuda_only(written, saved, read):
    """Before format 8, train.bf16=true (the old default) autocast on CUDA only: it reads as
    null, so evaluating an old CPU run on a CPU stays float32."""
    from attnlab.config import plain_config
    from attnlab.runs.checkpoint import Checkpoint

    config = plain_config(compose([*TINY, "model=fixed"]))
    config["train"]["bf16"] = saved
    cfg = Checkpoint("fixed", {}, config, format=written).run_config()
    assert cfg.train.bf16 is read
