"""The location-aware and window readers: what is special to them (the contract every reader
keeps is in test_models_contract.py)."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.readers import strips, tiny_config, tiny_reader

from attnlab.models import tokens
from attnlab.models.readers.location import LocationFeatures
from attnlab.models.readers.window import Stop


def test_the_location_term_changes_the_energies_and_vanishes_without_past_weights():
    m = tiny_reader("location")
    s = strips([3, 5])
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        b, t = memory.mask.shape
        h = m.split(m.init_state(memory), t)[0]  # same query and keys throughout
        planes = m.split(m.init_state(memory), t)[1].shape[1]
        left = torch.zeros(b, planes, t)
        left[:, :, 1] = 1.0
        right = torch.zeros(b, planes, t)
        right[:, :, 6] = 1.0
        e_left = m.energies(h, memory.keys, left)
        e_right = m.energies(h, memory.keys, right)
        e_none = m.energies(h, memory.keys, torch.zeros(b, planes, t))
        # With no past weights the energy is the additive attention's, the same module's.
        q = m.attention.query(h)
        plain = m.attention.v(torch.tanh(memory.keys + q[:, None])).squeeze(-1)
    assert not torch.allclose(e_left, e_right)
    assert torch.allclose(e_none, plain, atol=1e-6)
    # Only columns within reach of the kernel see the difference.
    far = m.loc_conv.kernel_size[0] // 2 + 1
    assert torch.allclose(e_left[:, 6 + far :], e_right[:, 6 + far :], atol=1e-6)


@pytest.mark.parametrize("features", list(LocationFeatures))
def test_the_state_carries_the_previous_or_cumulative_weights(features):
    m = tiny_reader("location", f"model.location={features.value}")
    s = strips([2, 6])
    inputs, _ = tokens.encode(s.labels)
    with torch.no_grad():
        memory = m.encode(s.images, s.widths)
        t = memory.mask.shape[1]
        state, total = m.init_state(memory), torch.zeros(2, t)
        for i in range(inputs.shape[1]):
            _, state, w = m.step(memory, state, inputs[:, i])
            total += w
            past = m.split(state, t)[1]  # (B, P, T)
            assert torch.all(w[~memory.mask] == 0)
            assert torch.allclose(w.sum(-1), torch.ones(2), atol=1e-5)
            want = {
                LocationFeatures.previous: [w],
                LocationFeatures.cumulative: [total],
                LocationFeatures.both: [w, total],
            }[features]
            assert torch.allclose(past, torch.stack(want, 1), atol=1e-5)


def _recording_steps(m, record):
    """Wrap the window reader's step to record (centres in, centres out) of every call."""
    step = m.step

    def wrapped(memory, state, prev):
        logits, new, w = step(memory, state, prev)
        record.append((m.split(state)[1], m.split(new)[1], w, memory.mask))
        return logits, new, w

    m.step = wrapped


@pytest.mark.parametrize("beam", [1, 3])
def test_the_window_centre_never_moves_backwards(beam):
    m = tiny_reader("window", seed=5)
    with torch.no_grad():  # wild window parameters: steps from ~0 to large
        m.params.weight.normal_(0, 3.0)
        m.params.bias.normal_(0, 3.0)
    record = []
    _recording_steps(m, record)
    s = strips([1, 8, 4], seed=3)
    m.read(s.images, s.widths, beam=beam)
    assert len(record) > 1
    for before, after, _, _ in record:
        assert before.shape[1] == 2  # tiny: two components, each with its own centre
        assert torch.all(after >= before)
    # Weights follow: with one component, the heaviest column never moves left.
    one = tiny_reader("window", "model.components=1", seed=5)
    out = one.read(s.images, s.widths)
    for i, text in enumerate(out.texts):
        peaks = out.weights[i, : len(text) + 1].argmax(-1)
        assert torch.all(peaks[1:] >= peaks[:-1]), peaks


def test_window_weights_are_zero_on_padding_even_past_the_end():
    m = tiny_reader("window")
    with torch.no_grad():
        m.params.weight.zero_()
        m.params.bias[4:] = 40.0  # every step jumps far past the end of every strip
    s = strips([1, 7, 3])
    inputs, _ = tokens.encode(s.labels)
    logits, weights = m(s.images, s.widths, inputs)
    mask = m.encode(s.images, s.widths).mask
    assert torch.isfinite(logits).all() and torch.isfinite(weights).all()
    assert torch.all(weights.permute(0, 2, 1)[~mask] == 0)
    real = (inputs != tokens.PAD).float()  # steps past a reading are not run (packed): 0
    assert torch.allclose(weights.sum(-1), real, atol=1e-5)
    last = mask.sum(1) - 1
    final = torch.tensor([len(t) for t in s.labels])  # each strip's last step (its EOS)
    at_end = weights[torch.arange(3), final]  # (3, T): past the end, on the last column
    assert at_end.argmax(-1).tolist() == last.tolist()
    assert bool((at_end[torch.arange(3), last] > 0.95).all())


def _steady_window(stop: Stop, pace: float, eos_logit: float):
    """A window reader whose centres move exactly ``pace`` columns a step and whose EOS
    logit is pushed by ``eos_logit``."""
    stride = tiny_config("window").model.stride  # model.pace is in pixels
    m = tiny_reader("window", f"model.stop={stop.value}", f"model.pace={pace * stride}")
    with torch.no_grad():
        m.params.weight.zero_()  # steps, widths and mixture no longer depend on the state
        m.out.bias[tokens.EOS] += eos_logit
    return m


@pytest.mark.parametrize("beam", [1, 3])
def test_the_window_reader_can_stop_at_the_strip_end(beam):
    pace = 3.3
    s = strips([2, 9, 5], seed=1)
    for stop in (Stop.end, Stop.first):
        m = _steady_window(stop, pace, eos_logit=-50.0)  # it would never say EOS itself
        out = m.read(s.images, s.widths, beam=beam)
        for i, n in enumerate(out.columns.tolist()):
            # Step k's centre is (k - 1/2) * pace; the window has passed the strip once it
            # is nearer the column after the last than the last: centre > n.
            steps_inside = math.floor(n / pace + 0.5)
            assert len(out.texts[i]) == steps_inside, (stop, n, out.texts[i])
    # Under ``eos`` the reader runs on to its step limit, one digit per column.
    out = _steady_window(Stop.eos, pace, eos_logit=-50.0).read(s.images, s.widths, beam=beam)
    assert [len(x) for x in out.texts] == out.columns.tolist()


def test_stop_first_takes_eos_and_stop_end_waits_for_the_end():
    s = strips([4, 6])
    first = _steady_window(Stop.first, 3.3, eos_logit=50.0).read(s.images, s.widths)
    assert first.texts == ["", ""]  # EOS came first
    end = _steady_window(Stop.end, 3.3, eos_logit=50.0).read(s.images, s.widths)
    assert [len(x) for x in end.texts] == [math.floor(n / 3.3 + 0.5) for n in end.columns]
    # Oracle lengths still win: exactly that many digits, past the end or not.
    lengths = torch.tensor([2, 40])
    forced = _steady_window(Stop.end, 3.3, 50.0).read(s.images, s.widths, lengths=lengths)
    assert [len(x) for x in forced.texts] == [2, 40]


def test_teacher_forcing_never_sees_the_stop_rule():
    s = strips([3, 8])
    losses = []
    for stop in Stop:
        m = tiny_reader("window", f"model.stop={stop.value}")
        losses.append(m.loss(s.images, s.widths, s.labels).item())
    assert losses[0] == losses[1] == losses[2]
