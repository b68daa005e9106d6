"""The encoders as a choice for every reader (``encoder=column|vgg|resnet``): the column encoder
unchanged, the conv encoders' padding masked (eval and training), their closed-form FLOPs,
their ONNX export, the config check and the field's CRNN (``model=crnn``) at preset=tiny."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.readers import strips, tiny_config, tiny_reader

from attnlab.config import plain_config
from attnlab.errors import UserError
from attnlab.models import encoders, registry
from attnlab.runs import checkpoint
from attnlab.tasks.compose import compose

# Every encoder beyond the lab's column encoder is a conv encoder (``_conv.ConvColumns``).
CONV = [n for n in encoders.names() if n != encoders.DEFAULT]
# Every reader ONNX can hold (each other says why not: Reader.ONNX_REFUSED).
EXPORTABLE = [n for n in registry.names() if not registry.get(n).reader.ONNX_REFUSED]


def test_the_encoders_are_the_packaged_modules_the_lab_s_first():
    from importlib.resources import files

    folder = files("attnlab").joinpath("models", "encoders")
    modules = sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".py"))
    packaged = [n for n in modules if not n.startswith("_")]
    assert encoders.names() == ["column", *(n for n in packaged if n != "column")]
    assert {"vgg", "resnet"} <= set(encoders.names())
    yamls = files("attnlab.conf").joinpath("encoder")
    assert all(yamls.joinpath(f"{n}.yaml").is_file() for n in encoders.names())
    assert compose([]).model.backbone == "column"  # the lab's default is unchanged
    assert compose(["encoder=resnet"]).model.backbone == "resnet"
    assert compose(["model=crnn"]).model.backbone == "vgg"
    assert compose(["model=crnn", "encoder=column"]).model.backbone == "column"


def test_the_column_encoder_keeps_its_parameter_names_so_old_checkpoints_load(tmp_path):
    """The attention reader's encoder names as before the encoders became a choice, and a
    checkpoint whose config has no model.backbone (written before) rebuilds the column
    encoder and reads as it was saved."""
    m = tiny_reader("attention", seed=3)
    names = sorted(k for k in m.state_dict() if k.startswith("encoder."))
    assert names == [
        "encoder.column_convs.0.bias",
        "encoder.column_convs.0.weight",
        "encoder.gru.bias_hh_l0",
        "encoder.gru.bias_hh_l0_reverse",
        "encoder.gru.bias_ih_l0",
        "encoder.gru.bias_ih_l0_reverse",
        "encoder.gru.weight_hh_l0",
        "encoder.gru.weight_hh_l0_reverse",
        "encoder.gru.weight_ih_l0",
        "encoder.gru.weight_ih_l0_reverse",
        "encoder.norm.bias",
        "encoder.norm.weight",
        "encoder.proj.bias",
        "encoder.proj.weight",
    ]
    config = plain_config(tiny_config("attention"))
    del config["model"]["backbone"], config["model"]["conv_channels"]
    path = checkpoint.Checkpoint(m.name, m.state_dict(), config).save(tmp_path / "old.pt")
    back, _ = checkpoint.load(path).rebuild(path)
    s = strips([3, 5])
    with torch.no_grad():
        a, b = m.read(s.images, s.widths), back.read(s.images, s.widths)
    assert type(back.encoder) is type(m.encoder) and a.texts == b.texts
    assert torch.equal(a.confidence, b.confidence)


@pytest.mark.parametrize("backbone", CONV)
@pytest.mark.parametrize("name", ["attention", "ctc"])
def test_conv_encoder_states_have_the_column_encoders_shapes(name, backbone):
    m = tiny_reader(name, f"encoder={backbone}")
    s = strips([1, 9, 4])
    with torch.no_grad():
        states, lengths, summary = m.encoder(s.images, s.widths)
    assert lengths.tolist() == m.encoder.column_lengths(s.widths).tolist()
    assert states.shape == (3, int(lengths.max()), m.encoder.state_size) == (3, max(lengths), 32)
    assert summary.shape == (3, 32)
    pad = torch.arange(states.shape[1])[None, :] >= lengths[:, None]
    assert bool(pad.any()) and bool((states[pad] == 0).all())


@pytest.mark.parametrize("backbone", CONV)
def test_batch_norm_learns_the_same_statistics_however_wide_the_padding(backbone):
    """Training mode: the same strips padded with 64 more columns of noise give the same
    features and the same running statistics (the padding is outside them)."""
    torch.manual_seed(0)
    m = tiny_reader("ctc", f"encoder={backbone}").train()
    s = strips([1, 5, 3])
    wide = torch.cat([s.images, torch.rand(3, s.images.shape[1], 64)], dim=2)
    twin = tiny_reader("ctc", f"encoder={backbone}").train()
    a, _ = m.encoder.features(s.images, s.widths)
    b, _ = twin.encoder.features(wide, s.widths)
    assert torch.allclose(a, b, atol=1e-5)
    for (name, x), (_, y) in zip(m.state_dict().items(), twin.state_dict().items(), strict=True):
        if "running" in name:
            assert torch.allclose(x, y, atol=1e-6), name
    moved = [k for k, v in m.state_dict().items() if k.endswith("running_mean") and v.abs().sum()]
    assert moved  # the statistics did move


@pytest.mark.parametrize("backbone", CONV)
@pytest.mark.parametrize("name", ["attention", "ctc", "fixed"])
def test_conv_encoders_closed_form_flops_match_the_counter(name, backbone):
    """Each closed-form term of the conv stages, the column layer and the BiGRU within 1% of
    the FLOPs torch's counter gives its module, at two lengths (``attnlab cost`` shows them)."""
    from attnlab.evaluation import cost_count

    cfg = compose([f"model={name}", "preset=tiny", f"encoder={backbone}"])
    model = registry.build(cfg.model, cfg.data.height, cfg.data.charset)
    for length in (2, 5):
        (c,) = cost_count.count_strips(model, cost_count.strips(cfg, length, 1))
        got = cost_count.term_counted(c["terms"], c["own"])
        stages = [t for t in c["terms"] if t.name.startswith("conv stage")]
        assert len(stages) == len(model.encoder.stages) and all(t.flops > 0 for t in stages)
        for term, n in zip(c["terms"], got, strict=True):
            assert abs(n - term.flops) <= 0.01 * term.flops, (term, n)
        assert abs(sum(t.flops for t in c["terms"]) - c["total"]) <= 0.01 * c["total"]


# The encoder's part of an exported graph is the same whichever reader reads its states:
# every conv encoder is exported under one reader of each way of reading them (a new
# context at every step, one column at a time by CTC, a location-aware context), and
# every reader under the column encoder (tests/test_models_contract.py).
READ_WAYS = [n for n in ("attention", "ctc", "location") if n in EXPORTABLE]


@pytest.mark.parametrize("backbone", CONV)
@pytest.mark.parametrize("name", READ_WAYS)
def test_a_reader_with_a_conv_encoder_exports_to_onnx_and_passes_parity(name, backbone, tmp_path):
    """``attnlab export`` of a tiny reader whose encoder is vgg or resnet (batch norm with
    moved running statistics, so eval mode is not the identity): torch and the ONNX reference
    loop read the same strips alike."""
    pytest.importorskip("onnxruntime")
    from attnlab.export.exporter import export_run

    cfg = tiny_config(name, f"encoder={backbone}")
    m = tiny_reader(name, f"encoder={backbone}", seed=5)
    for module in m.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    path = checkpoint.Checkpoint(m.name, m.state_dict(), plain_config(cfg)).save(tmp_path / "c.pt")
    out = tmp_path / "export"
    export_run(path, out, say=lambda _: None, per_length=2)
    figures = json.loads((out / "parity.json").read_text())
    assert figures["passed"] and figures["readings_differ"] == 0
    assert figures["max_logit_diff"] <= 1e-4 and figures["readings_compared"] >= 4 * 32


KNOWN = "|".join(encoders.names())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.backbone=alexnet"], f"model.backbone='alexnet': must be one of {KNOWN}"),
        (["encoder=vgg", "model.conv_channels=[]"], "model.conv_channels=[]: must be one or"),
        (["encoder=vgg", "model.conv_channels=[8]"], "model.stride=8: needs at least 3 conv"),
        (["encoder=resnet", "data.height=40"], "data.height=40: must be divisible by 16"),
    ],
)
def test_a_bad_encoder_config_is_refused_in_one_line(overrides, message):
    from attnlab.config.experiment import ExperimentConfig

    cfg = compose(overrides)
    with pytest.raises(UserError) as err:
        ExperimentConfig.check(cfg)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_crnn_trains_evaluates_and_exports_at_preset_tiny(tmp_path, attnlab_run):
    """``attnlab train model=crnn preset=tiny`` then ``eval`` and ``export`` of the run: the
    field's CRNN (vgg encoder, 2-layer BiGRU, CTC) end to end through the CLI, its checkpoint
    naming the vgg encoder, its export passing the parity check. A few steps only: the run's
    numbers mean nothing, the path is what is tested."""
    spec = registry.get("crnn")
    cfg = spec.config(name="crnn")
    assert (cfg.backbone, cfg.stride, cfg.layers) == ("vgg", 4, 2)
    run = tmp_path / "crnn"
    steps = ["train.steps=6", "train.val_every=3", "train.checkpoint_every=3", "train.log_every=3"]
    res = attnlab_run(
        "train",
        "preset=tiny",
        "model=crnn",
        *steps,
        "data.val_per_length=4",
        "train.threads=1",
        "train.progress=plain",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert saved["config"]["model"]["backbone"] == "vgg" and saved["step"] == 6
    assert any(k.startswith("encoder.stages.") for k in saved["model"])
    args = ["--n", "4", "eval.lengths=[1,3]", "eval.n_boot=0", "eval.explore_n=0"]
    res = attnlab_run("eval", run, *args, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (run / "eval" / "synthetic-greedy" / "metrics_by_length.csv").is_file()
    res = attnlab_run("export", run, tmp_path / "export", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "parity:" in res.stdout and "export written to" in res.stdout
    assert json.loads((tmp_path / "export" / "parity.json").read_text())["passed"]
