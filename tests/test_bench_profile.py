"""The bench's ``profile`` and ``levers`` sections (issue 59 item 3) at preset=tiny sizes:
the profile's rows are the phases of one real recipe step, in ms that add up to the totals
it prints; the levers' rows are steps/s and validation accuracy of real trainings, the
channels-last lever really changes the convolutions' memory format, and bf16 is measured only
where the CPU has it. No timing is asserted: speed is what the bench shows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnlab.bench import levers, profile
from attnlab.bench.sections import SECTIONS

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1", "train.batch_size=8"]
ROOT = Path(__file__).resolve().parent.parent


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # timings on one thread


def test_the_profile_breaks_one_recipe_step_into_its_phases(capsys):
    """A conv reader (model=crnn: vgg stages with batch norm, BiGRU, CTC): every phase the
    step has is measured, and the rows add up to the totals."""
    assert {"profile", "levers"} <= set(SECTIONS)
    assert "plain CRNN at 32 px" in profile.configs()
    assert any(k == "model=crnn" for k in profile.configs()["recipe: crnn at 64 px"])
    r = profile.run("crnn tiny", ["model=crnn", "data.height=32"], "cpu", TINY, steps=1)
    ms = r["ms"]
    assert set(ms) == {key for key, _ in profile.ROWS}
    for key in ("data", "conv", "norm", "gru", "loss", "backward", "optimiser", "val_forward"):
        assert ms[key] > 0, key
    assert all(v >= 0 for v in ms.values())
    training = sum(v for k, v in ms.items() if not k.startswith("val_"))
    assert r["step_ms"] == pytest.approx(training, abs=0.02)
    assert r["total_ms"] == pytest.approx(sum(ms.values()), abs=0.02)
    assert r["batch_size"] == 8 and r["threads"] == 1 and r["height"] == 32
    profile.show([r], "cpu")
    out = capsys.readouterr().out
    assert "forward: batch norm" in out and "crnn tiny" in out and "step (training rows)" in out


def test_the_profile_of_a_reader_without_batch_norm_has_none():
    """The column-encoder CTC reader (the recipe's at 32 px): no batch norm, its convolutions
    the column encoder's 1-D ones; the synthetic stream's augmentation split from its draw."""
    r = profile.run("ctc tiny", ["model=ctc"], "cpu", TINY, steps=1)
    assert r["ms"]["norm"] == 0 and r["ms"]["conv"] > 0 and r["ms"]["gru"] > 0
    assert r["ms"]["data"] > 0


def test_levers_measure_speed_and_accuracy_of_the_same_training(capsys):
    """Each lever trains the same steps from the same seed; float32 is the 1.0x row; the
    channels-last lever's convolutions run in that format; bf16 is run or skipped as the
    CPU says."""
    r = levers.run("crnn", "cpu", TINY, seconds=0.05, train_steps=2)
    rows = {x["lever"]: x for x in r["rows"]}
    assert list(rows) == list(levers.LEVERS)
    base = rows["float32"]
    assert base["speedup"] == 1.0 and base["val_exact_change"] == 0.0
    assert base["bf16_autocast"] is False and base["timed_steps"] >= 1
    for x in r["rows"]:
        if "skipped" not in x:
            assert 0.0 <= x["val_exact"] <= 1.0 and x["steps_per_s"] > 0
            assert x["pays"] == (x["speedup"] > levers.PAYS)
    if levers.bf16_on_cpu():
        assert rows["bf16"]["bf16_autocast"] is True
    else:
        assert "no bf16" in rows["bf16"]["skipped"]
    levers.show(r, "cpu")
    out = capsys.readouterr().out
    assert "channels_last" in out and "vs float32" in out


def test_only_the_levers_asked_for_run_and_compile_is_one_of_them_by_name(capsys):
    """``--levers`` picks the rows (torch.compile is asked for by name: it compiles for a
    minute); a name that is no lever is refused by the argument parser (exit 2)."""
    import importlib.util

    r = levers.run("crnn", "cpu", TINY, 0.02, 1, levers=("float32", "channels_last"))
    assert [x["lever"] for x in r["rows"]] == ["float32", "channels_last"]
    assert "compile" not in levers.LEVERS and levers.KEYS["compile"] == ["train.compile=true"]
    spec = importlib.util.spec_from_file_location("bench_script", ROOT / "scripts" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.parse_args(["--levers", "float32,compile"]).levers == ("float32", "compile")
    with pytest.raises(SystemExit) as end:
        bench.parse_args(["--levers", "float32,jit"])
    assert end.value.code == 2 and "['jit']: choose from" in capsys.readouterr().err


def test_the_channels_last_lever_changes_the_convolutions_memory_format():
    from attnlab.models import registry
    from attnlab.tasks.compose import compose

    cfg = compose(["preset=tiny", "model=crnn"])
    m = registry.build(cfg.model, cfg.data.height).to(memory_format=torch.channels_last)
    conv = next(x for x in m.modules() if isinstance(x, torch.nn.Conv2d) and x.in_channels > 1)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    seen = []
    conv.register_forward_hook(lambda _m, _a, out: seen.append(out))
    x = torch.ones(2, 32, 24)
    m.train()
    m.loss(x, torch.tensor([24, 16]), ["12", "3"]).backward()
    assert seen and seen[0].is_contiguous(memory_format=torch.channels_last)
