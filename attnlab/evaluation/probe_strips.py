"""The probe's strips (``attnlab probe``): a fixed set per length, drawn from its own seeds
(not the test sets'), kept with what it takes to render the same strips again with other
digits, for the glyph swap: same typeface, size, variant, blur, paper, contrast and noise
(``rerender``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab.data.strips import StripBatch, StripSynth, set_seed

PROBE_PURPOSE = "probe"  # the fixed strips of the probe: their own seeds, not the test sets


@dataclass
class ProbeSet:
    """The fixed probe strips of one length, with what it takes to render them again."""

    strips: StripBatch
    digits: torch.Tensor  # (N, L) digit ids
    state: torch.Tensor  # the generator state right after the digits were drawn


def probe_set(synth: StripSynth, length: int, n: int, purpose: str = PROBE_PURPOSE) -> ProbeSet:
    """``fixed_set(synth, purpose, length, n)``, keeping the digits and the generator state."""
    gen = torch.Generator().manual_seed(set_seed(synth.data.eval_seed, purpose, length))
    digits = synth.random_strings(torch.full((n,), length, dtype=torch.long), gen)
    state = gen.get_state()
    return ProbeSet(synth.render(digits, gen), digits, state)


def rerender(synth: StripSynth, ps: ProbeSet, digits: torch.Tensor) -> StripBatch:
    """The same strips with other digits: every draw of ``StripSynth.render`` (typeface, size,
    blur, variants, gaps, margins, paper, contrast, noise) depends on the shape of the digits
    only, so replaying the generator gives the same strip with the new digits' glyphs. Glyphs
    right of a changed one shift by the difference of the two glyphs' widths."""
    if digits.shape != ps.digits.shape:
        raise ValueError(f"rerender: digits {tuple(digits.shape)} vs {tuple(ps.digits.shape)}")
    gen = torch.Generator()
    gen.set_state(ps.state)
    return synth.render(digits, gen)
