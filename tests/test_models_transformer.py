"""The transformer reader: its masks, its decoding cache and its positional representations.

The reader contract (padding, beam, weights, checkpoints, learning, oracle lengths) is
checked by test_models_contract.py; these are the properties of a transformer in particular.
"""

from __future__ import annotations

import pytest
import torch
from helpers.readers import strips, tiny_config, tiny_reader

from attnlab.config import check_experiment
from attnlab.errors import UserError
from attnlab.models import registry, tokens
from attnlab.models.readers.transformer_attention import SelfAttention
from attnlab.models.readers.transformer_positions import (
    Pos,
    Positions,
    relative_bucket,
    sinusoidal,
)

registry.discover()

NAME = "transformer"


def positions(kind: str, bidirectional: bool = True, heads: int = 2, width: int = 16):
    torch.manual_seed(0)
    return Positions(Pos(kind), width, heads, 64, 16, 64, bidirectional, key="model.pos")


def random_inputs(n: int, steps: int, seed: int = 0) -> torch.Tensor:
    """(n, steps) teacher-forcing inputs: BOS then random digits."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(tokens.DIGIT0, tokens.VOCAB, (n, steps), generator=gen)
    ids[:, 0] = tokens.BOS
    return ids


# --- masks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pos", ["sinusoidal", "relative", "rotary", "none"])
def test_changing_a_later_target_token_never_changes_earlier_logits(pos):
    m = tiny_reader(NAME, f"model.pos={pos}")
    s = strips([3, 5])
    inputs = random_inputs(2, 7)
    changed = inputs.clone()
    changed[:, 4] = torch.where(inputs[:, 4] == tokens.DIGIT0, tokens.DIGIT0 + 1, tokens.DIGIT0)
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        a, wa = m.teacher_forcing(memory, inputs)
        b, wb = m.teacher_forcing(memory, changed)
    assert torch.equal(a[:, :4], b[:, :4]) and torch.equal(wa[:, :4], wb[:, :4])  # causal mask
    assert not torch.allclose(a[:, 4:], b[:, 4:])  # ... and the change does reach later steps


@pytest.mark.parametrize("encoder", ["gru", "transformer"])
def test_padded_columns_get_zero_cross_attention_and_their_pixels_change_nothing(encoder):
    m = tiny_reader(NAME, f"model.columns={encoder}")
    s = strips([1, 6, 3])
    noisy = s.images.clone()
    cols = torch.arange(noisy.shape[-1])
    pad = cols[None, None, :] >= s.widths[:, None, None]  # (B, 1, W) pixels past each strip
    noisy = torch.where(pad, torch.rand_like(noisy), noisy)
    inputs = random_inputs(3, 6)
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        logits, weights = m.teacher_forcing(memory, inputs)  # weights (B, S, T)
        other, _ = m.teacher_forcing(m.encode(noisy, s.widths), inputs)
    assert torch.all(weights.masked_select(~memory.mask[:, None, :]) == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:2]), atol=1e-5)
    assert torch.allclose(logits, other, atol=1e-5)
    assert int(memory.mask.sum(1).min()) < weights.shape[-1]  # there was padding to mask


# --- the decoding cache ---------------------------------------------------------------------


def read_cached_and_uncached(m, s, beam, lengths=None):
    with torch.no_grad():
        cached = m.read(s.images, s.widths, beam=beam, lengths=lengths)
        m.cache = False  # every step runs the whole prefix again, no cache
        try:
            plain = m.read(s.images, s.widths, beam=beam, lengths=lengths)
        finally:
            m.cache = True
    assert cached.texts == plain.texts
    assert torch.allclose(cached.score, plain.score, atol=1e-5)
    assert torch.allclose(cached.confidence, plain.confidence, atol=1e-5)
    assert torch.allclose(cached.weights, plain.weights, atol=1e-5)


@pytest.mark.parametrize("pos", ["sinusoidal", "learned", "relative", "rotary"])
@pytest.mark.parametrize("beam", [1, 3])
def test_cached_and_uncached_decoding_give_the_same_readings_and_scores(pos, beam):
    m = tiny_reader(NAME, f"model.pos={pos}", "model.columns=transformer", seed=4)
    s = strips([5, 3, 6], seed=1)
    read_cached_and_uncached(m, s, beam, lengths=torch.tensor([5, 3, 6]))  # a few steps


def test_cached_and_uncached_free_running_beams_agree_over_many_steps():
    m = tiny_reader(NAME, seed=4)  # untrained: reads until the step limit (a column each)
    read_cached_and_uncached(m, strips([2, 1], seed=1), beam=2)


def test_the_cache_grows_by_one_position_per_step_in_every_layer():
    m = tiny_reader(NAME)
    s = strips([2, 4])
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        state = m.init_state(memory)
        prev = torch.full((2,), tokens.BOS)
        for t in range(3):
            _, state, _ = m.step(memory, state, prev)
            prev = torch.full((2,), tokens.DIGIT0 + t)
    layers, heads, width = (
        len(m.decoder.layers),
        m.decoder.heads,
        m.decoder.norm.normalized_shape[0],
    )
    assert state.shape == (2, layers, 2, heads, 3, width // heads)


# --- positional representations -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "bidirectional"), [("relative", True), ("relative", False), ("rotary", True)]
)
def test_relative_and_rotary_scores_depend_only_on_the_offset(kind, bidirectional):
    p = positions(kind, bidirectional)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 1, 8, generator=gen), torch.randn(1, 2, 1, 8, generator=gen)
    pos = torch.arange(12)
    # The same query and key content at every position: what varies is position alone.
    s = p.scores(q.expand(1, 2, 12, 8), k.expand(1, 2, 12, 8), pos, pos)  # (1, h, 12, 12)
    assert torch.allclose(s[..., 1:, 1:], s[..., :-1, :-1], atol=1e-5)  # (i, j) ~ (i+1, j+1)
    assert not torch.allclose(s[..., 3, 3], s[..., 3, 0])  # ... and the offset matters
    # Any content: shifting every position by the same amount changes no score.
    q, k = torch.randn(1, 2, 5, 8, generator=gen), torch.randn(1, 2, 7, 8, generator=gen)
    q_pos, k_pos = torch.arange(5) + 2, torch.arange(7)
    shifted = p.scores(q, k, q_pos + 40, k_pos + 40)
    assert torch.allclose(p.scores(q, k, q_pos, k_pos), shifted, atol=1e-4)


def test_relative_buckets_cover_any_offset_and_share_the_farthest():
    offsets = torch.tensor([-100_000, -200, -64, 0, 1, 64, 200, 100_000])
    both = relative_bucket(offsets, 16, 64, bidirectional=True)
    assert both.min() >= 0 and both.max() < 16
    assert both[0] == both[1] == both[2] and both[-3] == both[-2] == both[-1]  # past 64
    assert both[3] != both[4]  # direction matters both ways
    causal = relative_bucket(-torch.arange(0, 300), 16, 64, bidirectional=False)
    assert torch.equal(causal[:8], torch.arange(8))  # exact for small offsets
    assert causal.max() == 15 and torch.all(causal[1:] >= causal[:-1])  # then log-spaced


def test_sinusoidal_positions_are_defined_far_beyond_the_training_length():
    table = sinusoidal(torch.arange(2000), 32)  # (2000, 32)
    assert torch.isfinite(table).all() and table.abs().max() <= 1
    assert torch.cdist(table, table).add(torch.eye(2000) * 1e9).min() > 1e-3  # all distinct
    assert torch.equal(sinusoidal(torch.arange(1990, 2000), 32), table[1990:])  # a formula
    m = tiny_reader(NAME, "model.pos=sinusoidal", "model.max_len=4")  # max_len: learned only
    s = strips([2])
    with torch.no_grad():
        logits, _ = m.teacher_forcing(m.encode(s.images, s.widths), random_inputs(1, 40))
    assert torch.isfinite(logits).all()


def test_learned_positions_past_their_table_raise_a_user_error_naming_the_key():
    m = tiny_reader(NAME, "model.pos=learned", "model.max_len=4")
    s = strips([2])
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        m.teacher_forcing(memory, random_inputs(1, 4))  # within the table
        with pytest.raises(UserError, match=r"model\.max_len=4.*model\.pos=learned"):
            m.teacher_forcing(memory, random_inputs(1, 5))
        with pytest.raises(UserError, match=r"model\.max_len"):
            m.read(s.images, s.widths, lengths=torch.tensor([6]))  # 7 steps: past 4
    cols = tiny_reader(
        NAME, "model.columns=transformer", "model.enc_pos=learned", "model.max_len=8"
    )
    with pytest.raises(UserError, match=r"model\.enc_pos=learned"):
        cols.encode(s.images, s.widths)  # a 2-digit strip has more than 8 columns


@pytest.mark.parametrize("kind", ["none", "sinusoidal", "relative", "rotary"])
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_through_sdpa_is_the_softmax_of_the_written_out_scores(kind, causal):
    p = positions(kind, bidirectional=not causal)
    attn = SelfAttention(16, 2, 0.0).eval()
    x = torch.randn(2, 6, 16)
    key_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    with torch.no_grad():
        y, _ = attn(x, p, key_mask=key_mask, causal=causal)
        q, k, v = attn.qkv(x).view(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        pos = torch.arange(6)
        s = p.scores(q, k, pos, pos)  # (B, h, 6, 6)
        allowed = key_mask[:, None, None, :] & (pos[None, :] <= pos[:, None] if causal else True)
        w = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
        expected = attn.proj((w @ v).transpose(1, 2).reshape(2, 6, 16))
    assert torch.allclose(y, expected, atol=1e-5)


# --- weights, columns, config ---------------------------------------------------------------


def test_the_returned_weights_are_the_mean_of_the_chosen_layers_heads():
    s = strips([3, 2])
    inputs = random_inputs(2, 4)

    def weights(*overrides):
        m = tiny_reader(NAME, *overrides, seed=5)  # the choice changes no parameter
        with torch.no_grad():
            return m.teacher_forcing(m.encode(s.images, s.widths), inputs)[1]

    mean = weights()
    heads = [weights(f"model.attn_head={h}") for h in range(2)]
    assert torch.allclose(torch.stack(heads).mean(0), mean, atol=1e-6)
    assert not torch.allclose(heads[0], heads[1])
    assert not torch.allclose(weights("model.attn_layer=0"), mean)
    assert torch.equal(weights("model.attn_layer=1"), mean)  # two layers: 1 is the last


def test_transformer_columns_replace_the_bigru():
    gru = tiny_reader(NAME)
    cols = tiny_reader(NAME, "model.columns=transformer")
    assert any(n.startswith("encoder.gru.") for n, _ in gru.named_parameters())
    assert not any(n.startswith("encoder.gru.") for n, _ in cols.named_parameters())
    assert len(cols.column_encoder.layers) == 1 and len(gru.column_encoder.layers) == 0


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("model.heads=3", "model.heads"),
        ("model.attn_head=2", "model.attn_head"),
        ("model.attn_layer=2", "model.attn_layer"),
        ("model.dropout=1.0", "model.dropout"),
    ],
)
def test_bad_values_are_user_errors_naming_the_key(override, key):
    """Refused by the reader's own config (TransformerConfig.check), before it is built."""
    with pytest.raises(UserError, match=key.replace(".", r"\.")):
        check_experiment(tiny_config(NAME, override))


def test_rotary_needs_an_even_head_width():
    cfg = tiny_config(NAME, "model.pos=rotary", "model.dec_hidden=30", "model.heads=2")
    with pytest.raises(UserError, match=r"model\.heads.*rotary"):
        check_experiment(cfg)


def test_loss_and_reading_run_under_bf16_autocast():
    m = tiny_reader(NAME, "model.columns=transformer", "model.pos=relative")
    s = strips([2, 5])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = m.loss(s.images, s.widths, s.labels)
        out = m.read(s.images, s.widths, beam=2, lengths=torch.tensor([2, 5]))
    assert torch.isfinite(loss) and [len(t) for t in out.texts] == [2, 5]
    assert torch.allclose(out.weights.sum(-1)[:, 0], torch.ones(2), atol=1e-2)


# --- per-head maps --------------------------------------------------------------------------


def test_every_heads_weights_are_those_free_decoding_had_and_average_to_the_readers():
    m = tiny_reader(NAME, seed=3)
    s = strips([2, 5, 4])
    with torch.no_grad():
        out = m.read(s.images, s.widths)
        heads = m.head_weights(s.images, s.widths, out.texts)
    assert sorted(heads) == [f"layer {i} head {j}" for i in (1, 2) for j in (1, 2)]
    last = torch.stack([heads["layer 2 head 1"], heads["layer 2 head 2"]]).mean(0)
    for i, text in enumerate(out.texts):
        steps = len(text) + 1
        assert torch.allclose(last[i, :steps], out.weights[i, :steps], atol=1e-5)
    first = heads["layer 1 head 1"]
    assert torch.allclose(first.sum(-1), torch.ones(first.shape[:2]), atol=1e-5)
    assert not torch.allclose(first, heads["layer 2 head 1"])


def test_readers_with_one_attention_have_no_head_maps():
    m = tiny_reader("attention")
    s = strips([2])
    assert m.head_weights(s.images, s.widths, ["12"]) is None


def test_a_column_encoder_without_its_bigru_gives_features_only():
    m = tiny_reader(NAME, "model.columns=transformer")
    s = strips([3])
    feats, lengths = m.encoder.features(s.images, s.widths)
    assert feats.shape[:2] == (1, int(lengths[0]))
    with pytest.raises(RuntimeError, match="features"):
        m.encoder(s.images, s.widths)


@pytest.mark.slow
def test_eval_draws_per_head_maps_of_a_transformer_run(tmp_path, attnlab_run):
    run = tmp_path / "run"
    res = attnlab_run(
        "train", "preset=tiny", "model=transformer", "train.steps=3", "train.progress=plain",
        f"hydra.run.dir={run}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = attnlab_run(
        "eval", run, "eval.n=6", "eval.maps_k=1", "eval.map_lengths=[3]", "eval.head_maps=1",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    maps = run / "eval" / "synthetic-greedy" / "maps"
    heads = sorted(p.name for p in maps.glob("heads_*.png"))
    assert heads and all(name.startswith("heads_len03_") for name in heads)
    from PIL import Image

    with Image.open(maps / heads[0]) as im:
        assert im.width > 400 and im.height > 300
    assert "per-head maps" in res.stdout
