"""The lab's two readers and step-wise decoding: what is special to them (the contract every
reader keeps is in test_models_contract.py)."""

import pytest
import torch
from helpers.readers import strips, tiny_config

from attnlab.config import DataConfig
from attnlab.data.strips import StripSynth, TrainStream
from attnlab.errors import UserError
from attnlab.models import encoders, registry, tokens
from attnlab.models.base import count_parameters
from attnlab.models.scoring import Scorer, masked_softmax
from attnlab.models.stepwise_search import beam_search, greedy


def reader(kind: str, **kw) -> torch.nn.Module:
    overrides = tuple(f"model.{k}={v.value if isinstance(v, Scorer) else v}" for k, v in kw.items())
    cfg = tiny_config(kind, *overrides)
    torch.manual_seed(0)
    return registry.build(cfg.model, cfg.data.height).eval()


def test_tokens_round_trip_and_cut_after_eos():
    inputs, targets = tokens.encode(["407", "1"])
    assert inputs[0].tolist() == [tokens.BOS, 7, 3, 10]
    assert targets[1].tolist() == [4, tokens.EOS, tokens.PAD, tokens.PAD]
    ids = torch.tensor([[7, 3, tokens.EOS, 5, 6], [4, 4, 4, 4, 4]])
    assert tokens.to_texts(ids) == ["40", "11111"]


def test_masked_softmax_zeroes_padding_and_sums_to_one():
    scores = torch.tensor([[1.0, 2.0, 3.0, 50.0], [0.0, 0.0, 9.0, 9.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    w = masked_softmax(scores, mask)
    assert torch.all(w[~mask] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(2))
    assert torch.allclose(w[1, :2], torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("scorer", list(Scorer))
def test_attention_weights_shape_rows_and_padding(scorer):
    s = strips([2, 7, 4])
    m = reader("attention", scorer=scorer)
    inputs, _ = tokens.encode(s.labels)
    logits, weights = m(s.images, s.widths, inputs)
    memory = m.encode(s.images, s.widths)
    b, t = memory.mask.shape
    assert logits.shape == (3, inputs.shape[1], tokens.VOCAB)
    assert weights.shape == (3, inputs.shape[1], t)  # (B, steps, columns)
    real = (inputs != tokens.PAD).float()  # steps past a reading are not run (packed): 0
    assert torch.allclose(weights.sum(-1), real, atol=1e-5)
    assert torch.all(weights.permute(0, 2, 1)[~memory.mask] == 0)
    # Columns: ceil(width / stride) per strip.
    assert memory.mask.sum(1).tolist() == [(int(w) + 1) // 2 for w in s.widths]  # stride 2


def test_keys_are_projected_once_per_strip():
    s = strips([3, 5])
    m = reader("attention")
    calls = []
    m.attention.key.register_forward_hook(lambda *a: calls.append(1))
    inputs, _ = tokens.encode(s.labels)
    m(s.images, s.widths, inputs)
    assert len(calls) == 1  # not once per output step


@pytest.mark.parametrize("kind", ["fixed", "attention"])
def test_beam_search_of_width_one_is_greedy_and_unnormalised_beams_score_higher(kind):
    s = strips([3, 6, 2, 8], seed=2)
    m = reader(kind)
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        g = greedy(m, memory)
        b1 = beam_search(m, memory, width=1)
        b4 = beam_search(m, memory, width=4, alpha=0.0)  # unnormalised: maximises probability
    assert g.texts == b1.texts
    assert torch.allclose(g.confidence, b1.confidence)
    assert torch.all(b4.confidence >= g.confidence - 1e-6)
    if kind == "attention":
        assert b4.weights is not None and b4.weights.shape[0] == 4


def test_untrained_reading_stops_at_the_step_limit():
    s = strips([2])
    m = reader("attention")
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        out = greedy(m, memory)
    assert len(out.texts[0]) <= int(memory.mask.sum())  # never more digits than columns


def test_both_readers_share_the_encoder_and_have_comparable_sizes():
    fixed = registry.build(registry.config_node("fixed"), 32)
    attn = registry.build(registry.config_node("attention"), 32)
    assert count_parameters(fixed.encoder) == count_parameters(attn.encoder)
    ratio = count_parameters(attn) / count_parameters(fixed)
    assert 0.9 < ratio < 1.2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "ctc_aux", "steps"),
    # With the auxiliary CTC loss a reader this small takes longer to start (CTC's early
    # all-blank plateau); at the default sizes it does not (step 500 validates at 78% with
    # it, 71% without).
    [("fixed", 0.0, 150), ("attention", 0.0, 150), ("attention", 1.0, 400)],
)
def test_a_tiny_reader_learns_a_tiny_task(kind, ctc_aux, steps):
    clean = DataConfig(
        font_sizes=[26], stroke_widths=[0], variants=1, scale=[1.0, 1.0], shear=[0.0, 0.0],
        rotation=[0.0, 0.0], v_offset=0, noise=[0.0, 0.0], blur=[0.0, 0.0],
        fonts=["bundled"], exclude_fonts=["STIX", "cm", "pillow", "Oblique", "Italic", "Bold"],
        dilate=0.0, ink_level=[0.0, 0.0], strip_scale=[1.0, 1.0], strip_shift=0.0, wave=0.0,
        resample=[1.0, 1.0], shading=0.0,
    )  # fmt: skip
    m = reader(kind, ctc_aux=ctc_aux).train()
    stream = TrainStream(StripSynth(clean), [1, 2], batch_size=64, seed=0)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for _ in range(steps):
        b = stream.next()
        loss = m.loss(b.images, b.widths, b.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    m.eval()
    gen = torch.Generator().manual_seed(99)
    test = StripSynth(clean).sample(torch.tensor([1, 2] * 100), gen)
    out = m.read(test.images, test.widths)
    acc = sum(a == b for a, b in zip(out.texts, test.labels, strict=True)) / len(test)
    assert acc >= 0.9, f"{kind} reader reached only {acc:.2%} on 1-2 digit clean strips"


@pytest.mark.parametrize(
    "overrides",
    [
        ("model.column_convs=[12,8]",),  # over pixel columns, then stacked by `stride`
        ("model.column_convs=[12]", "model.stem_channels=[4]", "model.stride=2"),  # after a stem
    ],
)
def test_column_convolutions_see_the_strip_alone_whatever_it_is_batched_with(overrides):
    m = reader("attention", **dict(o.removeprefix("model.").split("=", 1) for o in overrides))
    assert len(m.encoder.column_convs) == overrides[0].count(",") + 1
    s = strips([1, 9, 4])
    noisy = s.images.clone()  # whatever lies past a strip's width must not matter
    pad = torch.arange(noisy.shape[-1])[None, None, :] >= s.widths[:, None, None]
    noisy = torch.where(pad, torch.rand_like(noisy), noisy)
    with torch.no_grad():
        batch, lengths, _ = m.encoder(noisy, s.widths)
        for i in range(len(s)):
            one = s.select([i])
            alone, n, _ = m.encoder(one.images, one.widths)
            assert int(n[0]) == int(lengths[i])
            assert torch.allclose(alone[0], batch[i, : int(n[0])], atol=1e-5)


@pytest.mark.parametrize("backbone", encoders.names())
def test_every_encoder_sees_the_strip_alone_whatever_it_is_batched_with(backbone):
    """Every registered encoder (eval mode): noise past a strip's width and the other
    strips of its batch do not move its states."""
    cfg = tiny_config("attention", f"encoder={backbone}")
    torch.manual_seed(0)
    m = registry.build(cfg.model, cfg.data.height).eval()
    assert m.encoder.name == backbone
    s = strips([1, 9, 4])
    pad = torch.arange(s.images.shape[-1])[None, None, :] >= s.widths[:, None, None]
    noisy = torch.where(pad, torch.rand_like(s.images), s.images)
    with torch.no_grad():
        batch, lengths, _ = m.encoder(noisy, s.widths)
        for i in range(len(s)):
            one = s.select([i])
            alone, n, _ = m.encoder(one.images, one.widths)
            assert int(n[0]) == int(lengths[i])
            assert torch.allclose(alone[0], batch[i, : int(n[0])], atol=1e-5)


def test_a_checkpoint_from_before_the_column_convolutions_reads_as_it_was_trained(tmp_path):
    from attnlab.config import plain_config
    from attnlab.runs import checkpoint

    cfg = tiny_config("attention", "model.column_convs=[]", "data.stretch=[1.0,1.0]")
    torch.manual_seed(0)
    m = registry.build(cfg.model, cfg.data.height).eval()
    config = plain_config(cfg)
    del config["model"]["column_convs"], config["data"]["stretch"], config["data"]["dilate"]
    del config["data"]["footless_ones"], config["data"]["augmented"]
    del config["data"]["batch_by_length"], config["data"]["elastic"]
    path = tmp_path / "old.pt"
    torch.save(
        {"format": 2, "reader": m.name, "model": m.state_dict(), "config": config, "step": 0},
        path,
    )
    back, old = checkpoint.load(path).rebuild(path)
    assert list(old.model.column_convs) == [] and len(back.encoder.column_convs) == 0
    assert list(old.data.stretch) == [1.0, 1.0] and old.data.dilate == 0.0
    assert old.data.footless_ones == 0.0  # added in a later format still: off
    assert old.data.augmented == 1.0  # every training strip was augmented (format 5 on: a share)
    assert old.data.batch_by_length is False  # lengths were mixed in every batch (format 6 on)
    # A format 3 file has the column convolutions but not the footless ones.
    torch.save({**torch.load(path, weights_only=True), "format": 3}, path)
    with pytest.raises(UserError, match="does not fit the configured model"):
        checkpoint.load(path).rebuild(path)  # column_convs: today's [64]
    assert checkpoint.load(path).run_config().data.footless_ones == 0.0
    torch.save({**torch.load(path, weights_only=True), "format": 4}, path)
    assert checkpoint.load(path).run_config().data.augmented == 1.0
    torch.save({**torch.load(path, weights_only=True), "format": 5}, path)
    assert checkpoint.load(path).run_config().data.batch_by_length is False
    assert checkpoint.load(path).run_config().data.elastic == 0.0
    # A file of today's format without the key is today's config: the default applies.
    torch.save({**torch.load(path, weights_only=True), "format": checkpoint.FORMAT}, path)
    with pytest.raises(UserError, match="does not fit the configured model"):
        checkpoint.load(path).rebuild(path)


def test_a_checkpoint_is_its_payload_and_back(tmp_path):
    """Checkpoint owns the layout: what it writes loads back field by field, None entries
    are left out of the file, and a payload that is not a checkpoint is one line."""
    from attnlab.config import plain_config
    from attnlab.runs import checkpoint

    cfg = tiny_config("attention")
    m = registry.build(cfg.model, cfg.data.height)
    ckpt = checkpoint.Checkpoint(
        m.name, m.state_dict(), plain_config(cfg), step=7, history=[{"step": 7, "loss": 1.5}],
        best={"step": 5, "exact_acc": 0.25}, data_split={"path": "x", "val": [1, 2]},
    )  # fmt: skip
    path = ckpt.save(tmp_path / "c.pt")
    payload = torch.load(path, weights_only=True)
    assert payload["format"] == checkpoint.FORMAT and payload["step"] == 7
    assert "init_from" not in payload and "optimizer" not in payload  # None: left out
    back = checkpoint.load(path)
    assert (back.reader, back.step, back.history, back.best) == (
        "attention",
        7,
        [{"step": 7, "loss": 1.5}],
        {"step": 5, "exact_acc": 0.25},
    )
    assert back.data_split == {"path": "x", "val": [1, 2]} and back.init_from is None
    assert all(torch.equal(back.model[k], v) for k, v in m.state_dict().items())
    assert back.run_config().model.name == "attention"
    torch.save({**payload, "format": 99}, path)
    with pytest.raises(UserError, match="format"):
        checkpoint.load(path)
    torch.save({**payload, "step": "seven"}, path)
    with pytest.raises(UserError, match="'step' entry is a str"):
        checkpoint.load(path)


@pytest.mark.parametrize("kind", ["attention", "location", "window"])
def test_packed_training_loss_and_gradients_are_the_tokens_of_each_strip_alone(kind):
    """The encoder's column layers and the decoder's teacher-forced steps skip padding
    (packed): a mixed batch's loss is the token-weighted mean of its strips' own losses, and
    so is its gradient, as if nothing had been padded."""
    m = reader(kind, ctc_aux=0.0)
    s = strips([3, 8, 1, 5], seed=4)
    m.zero_grad()
    m.loss(s.images, s.widths, s.labels).backward()
    batch = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
    m.zero_grad()
    total = sum(len(t) + 1 for t in s.labels)  # tokens: digits + EOS
    for i, label in enumerate(s.labels):
        one = s.select([i])
        ((len(label) + 1) / total * m.loss(one.images, one.widths, [label])).backward()
    for name, grad in batch.items():
        assert torch.allclose(grad, m.get_parameter(name).grad, atol=1e-5, rtol=1e-4), name


def test_padded_columns_are_zero_before_the_recurrence():
    m = reader("attention")
    s = strips([1, 9, 4])
    with torch.no_grad():
        feats, lengths = m.encoder.features(s.images, s.widths)
    pad = torch.arange(feats.shape[1])[None, :] >= lengths[:, None]
    assert bool(pad.any()) and bool((feats[pad] == 0).all())
    assert bool((feats[~pad].abs().sum(-1) > 0).all())
