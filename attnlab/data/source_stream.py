"""The training stream of labelled strips (``data=folder``): ``SourceStream`` draws
batches from the decoded cache (``strip_cache.StripCache``) with the training augmentation
(``augment_real``) and ``data.mix`` synthetic strips; its state is the generator's after the
batches handed out, so a resumed run draws what it would have. Drawing a batch from the cache
is cheap (the decoding was done once); preparing it one batch ahead in a worker thread
(``prefetch``) halved the attention reader's strips/s on 2 cores (950 against 1,960: the
worker's torch ops and the step's compete for the same two threads), so it is off by default.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from attnlab.data.augment import jpeg, shading, slant, vary_strips, warp
from attnlab.data.photo import vary_ink, vary_pixels
from attnlab.data.ranges import uniform
from attnlab.data.strip_cache import StripCache
from attnlab.data.strips import StripBatch, StripSynth, pad_strips


def augment_real(batch: StripBatch, d: Any, gen: torch.Generator) -> StripBatch:
    """The training augmentation on real strips: ``data.augmented`` of them get the
    whole-strip variation (``vary_strips`` on their ink, 1 - pixel), when on the elastic
    warp (``warp``, ``data.elastic`` > 0), the named augmentation for real images
    (``data.augment``: attnlab.data.photo, ink before the shading, pixels after), paper
    shading and, when on, JPEG; every draw from
    ``gen`` (none for a variation that is off). Each acts on every strip's own columns
    (``widths``), so a strip is varied alike beside a longer one; padded columns stay paper."""
    b = len(batch)
    varied = torch.rand(b, generator=gen) < d.augmented  # (B,)
    if not bool(varied.any()):
        return batch
    images = batch.images
    w = images.shape[-1]
    sub, widths = images[varied], batch.widths[varied]
    ink = vary_strips(1.0 - sub, widths, d, gen)  # (b', H, W) 1 = full ink
    if d.elastic > 0:
        ink = warp(ink, d.elastic, gen, widths)
    if d.slant > 0:
        ink = slant(ink, d.slant, gen)
    named = list(getattr(d, "augment", None) or [])
    if named:
        ink = vary_ink(ink, named, gen, widths)
    shade = shading(widths, w, d.shading, gen)  # (b', W)
    pixels = (1.0 - ink) * shade[:, None, :]
    if named:
        pixels = vary_pixels(pixels, named, gen, widths)
    if d.jpeg > 0:
        squeezed = torch.rand(len(sub), generator=gen) < d.jpeg
        quality = uniform(d.jpeg_quality, len(sub), gen)
        if bool(squeezed.any()):
            pixels[squeezed] = jpeg(pixels[squeezed], quality[squeezed], widths[squeezed])
    outside = torch.arange(w) >= widths[:, None]  # (b', W)
    images[varied] = pixels.masked_fill_(outside[:, None, :], 1.0)
    return batch


def join(a: StripBatch, b: StripBatch) -> StripBatch:
    """Two batches as one, padded with paper to the wider."""
    images = [a.images[i, :, : int(a.widths[i])] for i in range(len(a))]
    images += [b.images[i, :, : int(b.widths[i])] for i in range(len(b))]
    labels = a.labels + b.labels
    spans = torch.zeros(len(labels), max(map(len, labels)), 2, dtype=torch.long)
    return pad_strips(images, labels, spans)


class SourceStream:
    """Endless training batches from a strip cache (same interface as ``TrainStream``)."""

    def __init__(
        self,
        cache: StripCache,
        batch_size: int,
        seed: int,
        data: Any,
        synth: StripSynth | None = None,
        seen: list[int] | None = None,
        prefetch: bool = False,
    ):
        self.cache, self.batch_size, self.data = cache, batch_size, data
        self.synth = synth if data.mix > 0 else None
        self.seen = torch.tensor(seen or [1], dtype=torch.long)
        self.n_synth = round(data.mix * batch_size) if self.synth is not None else 0
        self.generator = torch.Generator().manual_seed(seed)
        self.handed = self.generator.get_state()  # the state after the batches handed out
        self.pool = ThreadPoolExecutor(max_workers=1) if prefetch else None
        self.ahead: Future | None = None

    def _make(self) -> tuple[StripBatch, torch.Tensor]:
        g = self.generator
        pick = torch.randint(0, len(self.cache), (self.batch_size - self.n_synth,), generator=g)
        batch = augment_real(self.cache.batch(pick), self.data, g)
        if self.n_synth:
            lengths = self.seen[torch.randint(0, len(self.seen), (self.n_synth,), generator=g)]
            batch = join(batch, self.synth.sample(lengths, g, augment=True))
        return batch, g.get_state()

    def next(self) -> StripBatch:
        if self.pool is None:
            batch, self.handed = self._make()
            return batch
        ahead = self.ahead or self.pool.submit(self._make)
        batch, self.handed = ahead.result()
        self.ahead = self.pool.submit(self._make)
        return batch

    def state(self) -> torch.Tensor:
        return self.handed.clone()

    def load_state(self, state: torch.Tensor) -> None:
        if self.ahead is not None:
            self.ahead.result()
            self.ahead = None
        self.generator.set_state(state)
        self.handed = state.clone()
