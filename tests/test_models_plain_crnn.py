"""The plain CRNN a tutorial teaches (issue 59 item 1) as a config of attnlab's own readers:
``model=plain_crnn`` is the CTC reader (model=crnn) on ``encoder=plain`` (one conv + batch
norm + ReLU per stage, then that stage's own pool), its two remaining rows flattened
(``model.conv_rows``) and projected to 128 (``model.conv_features``): 611,563 parameters,
trained with the tutorial's optimiser settings. The options it needed are general: every
conv encoder reads conv_rows and conv_features, and each is checked in one line."""

from __future__ import annotations

import pytest
import torch
from helpers.readers import strips
from helpers.runs import TINY

from attnlab.config import check_experiment
from attnlab.errors import UserError
from attnlab.evaluation import cost_count
from attnlab.models import costs, encoders, registry
from attnlab.runs import checkpoint
from attnlab.tasks.compose import compose

PARAMS = 611_563  # the tutorial's count


def _built(*overrides: str):
    cfg = compose(["model=plain_crnn", *overrides])
    check_experiment(cfg)
    torch.manual_seed(0)
    return cfg, registry.build(cfg.model, cfg.data.height, cfg.data.charset)


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_the_plain_crnn_is_the_tutorial_s_reader_and_training():
    cfg, m = _built()
    assert (cfg.model.name, cfg.model.backbone, cfg.data.height) == ("crnn", "plain", 32)
    assert _count(m) == PARAMS
    e = m.encoder
    # five stages of 3x3 conv (with bias) + batch norm, 16-32-64-64-64 channels
    assert [s.layer.conv.out_channels for s in e.stages] == [16, 32, 64, 64, 64]
    assert [s.pool for s in e.stages] == [(2, 2), (2, 2), (1, 1), (2, 1), (2, 1)]
    pairs = [(1, 16), (16, 32), (32, 64), (64, 64), (64, 64)]
    # weights, conv bias, batch norm's scale and shift
    assert _count(e.stages) == sum(9 * i * o + 3 * o for i, o in pairs) == 97_632
    assert e.rows == 2 and (e.proj.in_features, e.proj.out_features) == (128, 128)
    g = e.gru
    assert (g.input_size, g.hidden_size, g.num_layers, g.bidirectional) == (128, 128, 2, True)
    assert m.classify.in_features == 256 and m.classify.out_features == 11  # digits + blank
    o, t = cfg.optim, cfg.train
    assert (o.lr, o.weight_decay, o.schedule, o.grad_clip) == (2e-3, 1e-4, "onecycle", 5.0)
    assert o.warmup_steps == 0.1 * t.steps == 250 and t.batch_size == 64
    # preset=tiny keeps its size (its train.* are the preset's); a given key still wins
    tiny, m = _built("preset=tiny")
    assert _count(m) == PARAMS and tiny.train.steps == 30
    assert _built("model.hidden=64")[0].model.hidden == 64


def test_its_flops_are_the_closed_form_and_match_the_counter():
    """Hand-written: each conv at its stage's input resolution (pools after), the column
    layer and the BiGRU; the encoder's own terms and torch's counter agree within 1%."""
    cfg, m = _built("preset=tiny")
    for length in (2, 5):
        (c,) = cost_count.count_strips(m, cost_count.strips(cfg, length, 1))
        w = 4 * c["columns"]  # the strip's pixel columns (stride 4)
        want = [
            costs.conv2d(32 * w, 1, 16, 3),
            costs.conv2d(16 * w // 2, 16, 32, 3),
            costs.conv2d(8 * w // 4, 32, 64, 3),
            costs.conv2d(8 * w // 4, 64, 64, 3),
            costs.conv2d(4 * w // 4, 64, 64, 3),
            costs.linear(w // 4, 128, 128),
            costs.gru(w // 4, 128, 128, 2, 2),
        ]
        terms = [x for x in c["terms"] if x.part == "encoder"]
        assert [x.flops for x in terms] == want
        for term, n in zip(c["terms"], cost_count.term_counted(c["terms"], c["own"]), strict=True):
            assert abs(n - term.flops) <= 0.01 * term.flops, (term, n)


def test_a_strip_reads_the_same_alone_and_in_a_padded_batch_rows_flattened():
    """The flattened rows and the pools after the convolutions keep padding masked, in
    eval mode and in training mode's batch statistics."""
    _, m = _built("preset=tiny")
    s = strips([1, 9, 4])
    m.eval()
    with torch.no_grad():
        batch = m.read(s.images, s.widths)
        for i in range(len(s)):
            alone = m.read(s.select([i]).images, s.select([i]).widths)
            assert alone.texts[0] == batch.texts[i]
            assert torch.allclose(alone.confidence[0], batch.confidence[i], atol=1e-4)
    m.train()
    wide = torch.cat([s.images, torch.rand(3, s.images.shape[1], 64)], dim=2)
    a, _ = m.encoder.features(s.images, s.widths)
    b, _ = m.encoder.features(wide, s.widths)
    assert torch.allclose(a, b, atol=1e-5)


def test_it_trains_reads_and_is_counted_through_the_cli(tmp_path, attnlab_run):
    """``attnlab train model=plain_crnn preset=tiny`` a few steps, then ``attnlab eval`` of
    the run: its checkpoint names the plain encoder and holds 611,563 parameters (its ONNX
    parity, rows flattened: tests/test_models_encoders.py, every registered encoder)."""
    run = tmp_path / "plain"
    steps = ["train.steps=4", "train.val_every=2", "train.checkpoint_every=2"]
    res = attnlab_run(
        "train", *TINY, "model=plain_crnn", *steps, "data.val_per_length=4",
        f"hydra.run.dir={run}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert saved["config"]["model"]["backbone"] == "plain" and saved["step"] == 4
    assert saved["config"]["optim"]["schedule"] == "onecycle"
    assert sum(v.numel() for k, v in saved["model"].items() if _param(k)) == PARAMS
    last = run / "checkpoints" / "last.pt"
    back, _ = checkpoint.load(last).rebuild(last)
    assert _count(back) == PARAMS
    args = ["--n", "4", "eval.lengths=[1,3]", "eval.n_boot=0", "eval.explore_n=0"]
    res = attnlab_run("eval", run, *args, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (run / "eval" / "synthetic-greedy" / "metrics_by_length.csv").is_file()


def _param(key: str) -> bool:
    return not key.endswith(("running_mean", "running_var", "num_batches_tracked"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.conv_pools=[2x2,2x2]"], "model.conv_pools=['2x2', '2x2']: must have one entry"),
        (["model.conv_pools=[2x2,2x2,nope,2x1,2x1]"], "model.conv_pools=['2x2', '2x2', 'nope'"),
        (["model.conv_pools=[2x2,2x1,none,2x1,2x1]"], "model.conv_pools=['2x2', '2x1', 'none'"),
        (["data.height=40"], "data.height=40: must be divisible by 16"),
        (["model.conv_rows=sum"], "model.conv_rows='sum': must be one of mean|flatten"),
        (["model.conv_features=-1"], "model.conv_features=-1: must be >= 0"),
        (["encoder=vgg", "model.conv_rows=sum"], "model.conv_rows='sum'"),
    ],
)
def test_a_bad_plain_encoder_config_is_refused_in_one_line(overrides, message):
    cfg = compose(["model=plain_crnn", *overrides])
    with pytest.raises(UserError) as err:
        check_experiment(cfg)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_another_encoder_s_pools_key_is_refused_and_the_row_options_are_general():
    """conv_pools is the plain encoder's own; conv_rows and conv_features every conv
    encoder reads (vgg: the rows averaged as before unless asked to flatten)."""
    with pytest.raises(UserError, match="encoder=plain"):
        compose(["encoder=vgg", "model.conv_pools=[2x2]"])
    cfg = compose(["preset=tiny", "model=crnn", "model.conv_rows=flatten"])
    cfg.model.conv_channels, cfg.model.conv_features = [4, 8, 8], 24
    torch.manual_seed(0)
    m = registry.build(cfg.model, 32, cfg.data.charset)  # 32 px, 3 halvings: 4 rows
    assert (m.encoder.rows, m.encoder.proj.in_features, m.encoder.gru.input_size) == (4, 32, 24)
    s = strips([2, 5])
    with torch.no_grad():
        assert m.encoder(s.images, s.widths)[0].shape[-1] == 2 * cfg.model.hidden
    cfg.model.backbone = "plain"
    with pytest.raises(UserError, match="model.conv_features=24"):
        encoders.build(cfg.model, 32, recurrent=False)  # a reader reading the columns itself
