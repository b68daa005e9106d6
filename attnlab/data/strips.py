"""Synthetic digit strips: vectorised synthesis from the glyph bank, fixed sets, the stream.

A strip is a grey image of a string of ``data.charset`` (the ten digits by default), fixed
height, width growing with the string.
Pixels are floats in [0, 1] with 1 = white paper and 0 = black ink, as a scan would be.
Every strip carries its label and the column span [start, end) of every glyph.

Synthesis is tensor work: glyphs are gathered from the bank (``attnlab.data.glyphs``) and
added onto a flat canvas with one ``index_add_``; then, for training strips, whole-strip
variation (``attnlab.data.augment``) and per-strip contrast, paper and noise, all batched;
a share ``data.clutter`` of them captcha-like instead (``attnlab.data.clutter``).
All randomness comes from an explicit ``torch.Generator``: the same seed gives the same
strips on every machine.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import torch

from attnlab.config import DataConfig
from attnlab.data import clutter, clutter_glyphs
from attnlab.data.augment import jpeg, shading, vary_strips
from attnlab.data.glyphs import GlyphBank, glyph_bank
from attnlab.data.ranges import randint, uniform
from attnlab.errors import UserError


@dataclass
class StripBatch:
    """A batch of strips padded to the widest one. Padded columns are white paper (1.0)."""

    images: torch.Tensor  # (B, H, W) float32, 1 = paper
    widths: torch.Tensor  # (B,) int64, real width of each strip in pixels
    labels: list[str]
    spans: torch.Tensor  # (B, L, 2) int64 glyph [start, end) columns; (0, 0) past the label

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def mask(self) -> torch.Tensor:
        """(B, W) bool, True on a strip's real columns."""
        cols = torch.arange(self.images.shape[-1])
        return cols[None, :] < self.widths[:, None]

    def select(self, index: torch.Tensor | list[int]) -> StripBatch:
        """Sub-batch, cropped to its own widest strip."""
        index = torch.as_tensor(index, dtype=torch.long)
        widths = self.widths[index]
        w = int(widths.max()) if len(index) else 0
        labels = [self.labels[i] for i in index.tolist()]
        span_len = max((len(s) for s in labels), default=0)
        return StripBatch(
            images=self.images[index, :, :w],
            widths=widths,
            labels=labels,
            spans=self.spans[index, :span_len],
        )


def pad_strips(images: list[torch.Tensor], labels: list[str], spans: torch.Tensor) -> StripBatch:
    """Stack strips of different widths into a batch, padding with paper."""
    h = images[0].shape[0]
    widths = torch.tensor([im.shape[1] for im in images], dtype=torch.long)
    out = torch.ones(len(images), h, int(widths.max()))
    for i, im in enumerate(images):
        out[i, :, : im.shape[1]] = im
    return StripBatch(out, widths, labels, spans)


# ---------------------------------------------------------------------------------------------
# Synthesis


@functools.lru_cache(maxsize=8)
def _noise_windows(height: int, width: int) -> torch.Tensor:
    """(4096, H*W) overlapping windows of one fixed N(0, 1) texture.

    Drawing a window per strip costs a copy instead of fresh Gaussian draws for every pixel;
    which window a strip gets comes from the caller's generator.
    """
    step = 61
    gen = torch.Generator().manual_seed(61)
    tex = torch.randn(4096 * step + height * width, generator=gen)
    return tex.unfold(0, height * width, step)[:4096]


class StripSynth:
    """Renders strings of ``data.charset`` into strips with the variation the config asks
    for. A string is held as character ids (``charset[i]``; the digit d for the digits)."""

    def __init__(self, data: DataConfig):
        self.data = data
        self.charset = str(data.charset)
        lo, hi = data.gap
        if lo > hi or data.margin[0] > data.margin[1] or data.margin[0] < 0:
            raise UserError("data.gap and data.margin must be [low, high] with low <= high")
        if data.source != "folder" or data.mix > 0:  # a run that draws strips: build it now
            _ = self.bank  # (a charset character no font has is refused before anything)

    @functools.cached_property
    def bank(self) -> GlyphBank:
        """The glyph bank, built on first use: a run on labelled strips alone (data=folder,
        data.mix=0) never draws one, so its charset may hold characters no font has."""
        return glyph_bank(self.data)

    def random_strings(self, lengths: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """(B,) lengths -> (B, L) character ids drawn uniformly from the charset, -1 past
        each length."""
        lmax = int(lengths.max())
        digits = torch.randint(0, len(self.charset), (len(lengths), lmax), generator=gen)
        return torch.where(torch.arange(lmax)[None] < lengths[:, None], digits, -1)

    def sample(
        self, lengths: torch.Tensor, gen: torch.Generator, augment: bool = False
    ) -> StripBatch:
        """Strips of random strings of the charset with the given lengths."""
        return self.render(self.random_strings(lengths, gen), gen, augment)

    def render(
        self, digits: torch.Tensor, gen: torch.Generator, augment: bool = False
    ) -> StripBatch:
        """(B, L) character ids (-1 = none) -> strips. Every random draw is batched.

        ``augment``: also the whole-strip variation (``vary_strips``, paper shading, JPEG), which
        the training stream gets and fixed sets (validation, test, probes, exports) do not,
        and for a share ``data.clutter`` of the strips, captcha-like clutter (bent glyphs,
        paper, noise curves and dots, damage: ``attnlab.data.clutter``).
        """
        d = self.data
        bank = self.bank
        b, lmax = digits.shape
        r, k, c, v, wg, h = bank.columns.shape
        valid = digits >= 0  # (B, L)
        rows = torch.arange(b)
        # One typeface (font, size, stroke) and blur level per strip, a variant per glyph.
        rendering = torch.randint(0, r, (b,), generator=gen)
        level = torch.randint(0, k, (b,), generator=gen)
        variant = torch.randint(0, v, (b, lmax), generator=gen)
        flat = ((rendering * k + level)[:, None] * c + digits.clamp(min=0)) * v + variant
        widths = bank.widths.reshape(-1)[flat] * valid  # (B, L)
        gaps = randint(d.gap, (b, lmax), gen) * valid
        margins = randint(d.margin, (b, 2), gen)
        glyphs = bank.columns.reshape(-1, wg, h)[flat[valid]]  # (G, Wg, H) uint8
        lay = None
        if augment and getattr(d, "clutter", 0.0) > 0:  # drawn only when on: else as it was
            lay = clutter_glyphs.draw_layout(b, lmax, h, d.clutter, gen)
            glyphs, widths = clutter_glyphs.bend(glyphs, widths, valid, lay)  # (G, Wg', H) 0..255
            gaps = torch.where(lay.rows[:, None], lay.gaps, gaps) * valid
            margins = torch.where(lay.rows[:, None], margins + lay.margins, margins)
            wg = glyphs.shape[1]
        advance = (widths + gaps).clamp(min=0) * valid
        last = (valid.sum(1) - 1).clamp(min=0)  # the last glyph's gap is not in the strip
        advance[rows, last] = widths[rows, last]
        starts = margins[:, :1] + torch.cumsum(advance, 1) - advance  # (B, L)
        strip_w = starts[rows, last] + widths[rows, last] + margins[:, 1]
        strip_w = torch.maximum(strip_w, margins.sum(1) + 1)
        wmax = int(strip_w.max())
        # Add every glyph's columns onto a column-major canvas (B * W, H) in one index_add_.
        canvas_w = wmax + wg
        canvas = torch.zeros(b * canvas_w, h)
        first_col = rows[:, None] * canvas_w + starts  # (B, L)
        idx = first_col[valid][:, None] + torch.arange(wg)  # (G, Wg)
        canvas.index_add_(0, idx.reshape(-1), glyphs.reshape(-1, h).float())
        ink = canvas.view(b, canvas_w, h).transpose(1, 2).mul(1 / 255.0).clamp_(max=1.0)
        # The strips that get the whole-strip variation: all, or a share (data.augmented).
        varied = torch.rand(b, generator=gen) < d.augmented if augment and d.augmented < 1 else None
        if lay is not None:  # a cluttered strip has its own variation (clutter.paint) instead
            varied = ~lay.rows if varied is None else varied & ~lay.rows
        if augment and varied is None:
            ink = vary_strips(ink, strip_w, d, gen)  # (B, H, W + Wg), 1 = full ink
        elif augment and bool(varied.any()):
            ink[varied] = vary_strips(ink[varied], strip_w[varied], d, gen)
        pixels = self._appearance(ink, strip_w, varied, augment, gen)  # (B, H, W + Wg)
        if lay is not None and bool(lay.rows.any()):  # captcha-like paper, noise and damage
            pixels[lay.rows] = clutter.paint(ink[lay.rows], strip_w[lay.rows], gen)
        outside = torch.arange(canvas_w) >= strip_w[:, None]  # (B, W + Wg)
        pixels.masked_fill_(outside[:, None, :], 1.0)
        images = pixels[:, :, :wmax].contiguous()  # (B, H, W)
        spans = torch.stack([starts, starts + widths], -1) * valid[..., None]
        labels = ["".join(self.charset[i] for i in row if i >= 0) for row in digits.tolist()]
        return StripBatch(images, strip_w, labels, spans)

    def _appearance(self, ink, strip_w, varied, augment: bool, gen: torch.Generator):
        """Ink (B, H, W) -> grey pixels (B, H, W), 1 = paper: per-strip paper level (shaded
        when augmenting), ink contrast, noise and, for augmented strips when on, JPEG."""
        d = self.data
        b, h, canvas_w = ink.shape
        paper = uniform(d.background, b, gen)[:, None, None]
        contrast = uniform(d.contrast, b, gen)[:, None, None]
        noise_sd = uniform(d.noise, b, gen)[:, None]
        if augment:
            shade = shading(strip_w, canvas_w, d.shading, gen)  # (B, W)
            if varied is not None:
                shade = torch.where(varied[:, None], shade, 1.0)
            paper = paper * shade[:, None, :]  # (B, 1, W)
        pixels = paper - paper * contrast * ink
        if float(noise_sd.max()) > 0:
            windows = _noise_windows(h, canvas_w)
            pick = torch.randint(0, windows.shape[0], (b,), generator=gen)
            # Column-major, as the canvas: a strip's noise left of a column does not depend
            # on how wide the strip is (a glyph swapped by a probe changes nothing before it).
            noise = (noise_sd * windows[pick]).view(b, canvas_w, h).transpose(1, 2)
            pixels = pixels + noise
        pixels.clamp_(0.0, 1.0)
        if augment and d.jpeg > 0:  # drawn only when on: the stream is unchanged otherwise
            squeezed = torch.rand(b, generator=gen) < d.jpeg
            quality = uniform(d.jpeg_quality, b, gen)
            if varied is not None:
                squeezed &= varied
            if bool(squeezed.any()):
                pixels[squeezed] = jpeg(pixels[squeezed], quality[squeezed])
        return pixels


def set_seed(base: int, purpose: str, length: int) -> int:
    """A stable seed for the fixed set of one purpose ("val", "test") and length."""
    digest = hashlib.sha256(f"{base}/{purpose}/{length}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 62) - 1)


def fixed_set(synth: StripSynth, purpose: str, length: int, n: int) -> StripBatch:
    """The fixed strips of one length: identical for every reader, run and machine."""
    gen = torch.Generator().manual_seed(set_seed(synth.data.eval_seed, purpose, length))
    return synth.sample(torch.full((n,), length, dtype=torch.long), gen)


class TrainStream:
    """An endless stream of training batches drawn from the seen lengths."""

    def __init__(
        self,
        synth: StripSynth,
        seen: list[int],
        batch_size: int,
        seed: int,
        by_length: bool = False,
    ):
        """``by_length``: each batch holds strips of one seen length, so neither the columns
        nor the decoding steps are padded to the longest. A length is drawn in proportion to
        its tokens (digits + EOS): a mixed batch's loss, a mean over its tokens, weighs each
        length so, and one-length batches then give the same expected gradient."""
        self.synth = synth
        self.seen = torch.tensor(seen, dtype=torch.long)
        self.batch_size = batch_size
        self.by_length = by_length
        self.token_share = (self.seen + 1).double() / float((self.seen + 1).sum())
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> StripBatch:
        """A batch of training strips, with the whole-strip variation (augmentation)."""
        if self.by_length:  # as often as its share of a mixed batch's tokens (digits + EOS)
            pick = torch.multinomial(self.token_share, 1, generator=self.generator)
            lengths = self.seen[pick].repeat(self.batch_size)
        else:
            pick = torch.randint(0, len(self.seen), (self.batch_size,), generator=self.generator)
            lengths = self.seen[pick]
        return self.synth.sample(lengths, self.generator, augment=True)

    def state(self) -> torch.Tensor:
        return self.generator.get_state()

    def load_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)
