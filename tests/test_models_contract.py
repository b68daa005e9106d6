"""The contract every registered reader keeps, checked for each one the moment it exists.

Parametrised over ``registry.names()``: a new reader module is covered without editing this
file. Each test uses the reader's ``preset=tiny`` config, composed as the CLI composes it.
"""

from __future__ import annotations

import json

import pytest
import torch
from helpers.readers import strips, tiny_config, tiny_reader

from attnlab.config import plain_config
from attnlab.data.strips import StripSynth, TrainStream
from attnlab.models import encoders, registry
from attnlab.runs import checkpoint

READERS = registry.names()


@pytest.mark.parametrize("name", READERS)
def test_a_strip_reads_the_same_alone_and_inside_a_padded_batch(name):
    s = strips([1, 9, 4, 6])  # strip 0 is much narrower than the batch
    m = tiny_reader(name)
    with torch.no_grad():
        batch = m.read(s.images, s.widths)
        for i in range(len(s)):
            one = s.select([i])
            alone = m.read(one.images, one.widths)
            assert alone.texts[0] == batch.texts[i]
            assert torch.allclose(alone.confidence[0], batch.confidence[i], atol=1e-4)
            if batch.weights is not None:
                t = int(alone.columns[0])
                steps = alone.weights.shape[1]
                assert torch.allclose(alone.weights[0], batch.weights[i, :steps, :t], atol=1e-5)


@pytest.mark.parametrize("name", READERS)
def test_teacher_forcing_gives_a_strip_the_same_probabilities_alone_and_in_a_mixed_batch(name):
    """Training and the probes read given texts (teacher forcing); the step-wise readers run
    only the rows still reading at each step (packed): a strip's digit probabilities must
    not depend on the lengths of the others or on their order in the batch."""
    s = strips([2, 9, 1, 6, 4], seed=3)  # not sorted by length
    m = tiny_reader(name)
    with torch.no_grad():
        try:
            batch = m.digit_probs(s.images, s.widths, s.labels)
        except NotImplementedError:
            pytest.skip(f"{name} cannot give digit probabilities")
        for i, label in enumerate(s.labels):
            one = s.select([i])
            alone = m.digit_probs(one.images, one.widths, [label])
            assert torch.allclose(batch[i, : len(label) + 1], alone[0], atol=1e-5)
            assert bool((batch[i, len(label) + 1 :] == 0).all())


@pytest.mark.parametrize("name", READERS)
def test_beam_of_width_one_is_greedy_and_wider_beams_never_score_lower(name):
    s = strips([3, 6, 2, 8], seed=2)
    m = tiny_reader(name, seed=1)
    with torch.no_grad():
        g = m.read(s.images, s.widths, beam=1)
        again = m.read(s.images, s.widths, beam=1)
        b4 = m.read(s.images, s.widths, beam=4)
    assert g.texts == again.texts and torch.equal(g.confidence, again.confidence)
    assert torch.all(b4.score >= g.score - 1e-5), (b4.score, g.score)
    if g.weights is not None:
        assert b4.weights is not None and b4.weights.shape[0] == 4


@pytest.mark.parametrize("name", READERS)
def test_weights_when_present_are_per_step_distributions_over_real_columns(name):
    s = strips([2, 7, 4])
    m = tiny_reader(name)
    with torch.no_grad():
        out = m.read(s.images, s.widths)
    if out.weights is None:
        pytest.skip(f"the {name} reader returns no weights")
    b, steps, t = out.weights.shape
    assert b == 3 and t == int(out.columns.max())
    for i, text in enumerate(out.texts):
        emitted = min(len(text) + 1, steps)  # digits then EOS
        rows = out.weights[i, :emitted]
        assert torch.allclose(rows.sum(-1), torch.ones(emitted), atol=1e-5)
        assert torch.all(out.weights[i, :, int(out.columns[i]) :] == 0)  # padding
        assert torch.all(out.weights[i, emitted:] == 0)  # after EOS


@pytest.mark.parametrize("name", READERS)
def test_checkpoint_round_trip_gives_the_same_reader(name, tmp_path):
    cfg = tiny_config(name)
    m = tiny_reader(name, seed=3)
    ckpt = checkpoint.Checkpoint(m.name, m.state_dict(), plain_config(cfg))
    path = ckpt.save(tmp_path / "c.pt")
    back, _ = checkpoint.load(path).rebuild(path)
    s = strips([3, 5])
    with torch.no_grad():
        a, b = m.read(s.images, s.widths), back.read(s.images, s.widths)
    assert type(back) is type(m) and a.texts == b.texts
    assert torch.equal(a.confidence, b.confidence)


@pytest.mark.slow
@pytest.mark.parametrize("name", READERS)
def test_a_tiny_reader_learns_a_fixed_batch(name):
    cfg = tiny_config(name)
    m = tiny_reader(name)
    batch = TrainStream(StripSynth(cfg.data), [1, 2, 3], batch_size=32, seed=0).next()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    m.train()
    losses = []
    for _ in range(40):
        loss = m.loss(batch.images, batch.widths, batch.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("name", READERS)
@pytest.mark.parametrize("beam", [1, 3])
def test_oracle_length_decoding_reads_exactly_the_true_number_of_digits(name, beam):
    s = strips([1, 4, 7, 2], seed=4)
    m = tiny_reader(name, seed=2)
    lengths = torch.tensor([len(t) for t in s.labels])
    with torch.no_grad():
        out = m.read(s.images, s.widths, beam=beam, lengths=lengths)
    assert [len(t) for t in out.texts] == lengths.tolist()
    assert all(t.isdigit() for t in out.texts)


@pytest.mark.parametrize("name", READERS)
def test_every_reader_exports_to_onnx_and_passes_parity_or_is_refused_in_one_line(name, tmp_path):
    """``attnlab export`` of a tiny untrained reader: its graphs pass the parity check (torch
    and the ONNX reference loop read the same strips alike), or the reader is refused with
    one line saying why, and nothing is written."""
    pytest.importorskip("onnxruntime")
    from attnlab.errors import UserError
    from attnlab.export.exporter import export_run

    cfg = tiny_config(name)
    m = tiny_reader(name, seed=5)
    path = checkpoint.Checkpoint(m.name, m.state_dict(), plain_config(cfg)).save(tmp_path / "c.pt")
    out = tmp_path / "export"
    if registry.get(name).reader.ONNX_REFUSED:  # the reader says why it cannot be
        with pytest.raises(UserError, match=f"^the {name} reader cannot be exported to ONNX: "):
            export_run(path, out, say=lambda _: None)
        assert not out.exists()
        return
    export_run(path, out, say=lambda _: None, per_length=2)  # untrained: readings run long
    figures = json.loads((out / "parity.json").read_text())
    assert figures["passed"] and figures["readings_differ"] == 0
    assert figures["max_logit_diff"] <= 1e-4 and figures["readings_compared"] >= 4 * 32


def test_a_reader_built_as_shapes_only_has_every_tensor_of_the_real_one_and_imports_no_dynamo():
    """``registry.build_shapes`` (the size check before a run or a checkpoint is built): every
    reader's parameters and buffers with the real build's names and shapes, on the meta
    device, and in a fresh process without importing torch._dynamo (its first initialiser on
    a meta tensor would: ~1 s of every evaluation's start). The real build still initialises:
    the skip is this thread's, inside the build only."""
    import subprocess
    import sys

    code = """
import sys
from attnlab.models import registry
for name in registry.names():
    node = registry.config_node(name)
    shapes = registry.build_shapes(node, 32, "0123456789X")
    assert all(t.is_meta for t in shapes.state_dict().values()), name
    count = sum(p.numel() for p in registry.build_shapes(node, 32).parameters())
    assert registry.check_size(node, 32) == count, name
    print(name, sorted((k, tuple(v.shape)) for k, v in shapes.state_dict().items()))
print("dynamo", "torch._dynamo" in sys.modules)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "dynamo False"
    for line in lines[:-1]:
        name = line.split()[0]
        real = registry.build(registry.config_node(name), 32, "0123456789X")
        want = sorted((k, tuple(v.shape)) for k, v in real.state_dict().items())
        assert line == f"{name} {want}"
        weights = [p for p in real.parameters() if p.dim() > 1]
        assert weights and all(bool(p.abs().sum() > 0) for p in weights), name  # initialised


@pytest.mark.parametrize("backbone", [n for n in encoders.names() if n != encoders.DEFAULT])
@pytest.mark.parametrize("name", READERS)
def test_every_reader_reads_and_trains_with_every_conv_encoder(name, backbone):
    """Readers x encoders (the column encoder is every test above): a strip reads the same
    alone and inside a padded batch, and a few steps on a fixed batch lower the loss."""
    s = strips([1, 9, 4, 6])
    m = tiny_reader(name, f"encoder={backbone}")
    assert m.encoder.name == backbone
    with torch.no_grad():
        batch = m.read(s.images, s.widths)
        for i in range(len(s)):
            one = s.select([i])
            alone = m.read(one.images, one.widths)
            assert alone.texts[0] == batch.texts[i]
            assert torch.allclose(alone.confidence[0], batch.confidence[i], atol=1e-4)
    cfg = tiny_config(name, f"encoder={backbone}")
    train = TrainStream(StripSynth(cfg.data), [1, 2], batch_size=16, seed=0).next()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    m.train()
    losses = []
    for _ in range(8):
        loss = m.loss(train.images, train.widths, train.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
