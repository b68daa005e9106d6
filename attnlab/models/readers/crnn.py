"""The field's standard reader, registered as ``model=crnn``: CRNN (Shi et al. 2015), a VGG
conv encoder with batch norm (``encoder=vgg``), a 2-layer BiGRU over its columns and CTC.

It is the CTC reader (attnlab/models/readers/ctc.py: its loss, decoding, confidence and
export) with the field's encoder and sizes as its defaults, so it stands in every comparison
as the reference the field would train; ``encoder=...`` still chooses another encoder.

Its size is a small CRNN's: five conv stages (eight convolutions, 16 to 128 channels, pooled
early, the height down to one row at the default 32 px strips), 625k parameters; a training
step takes about 3 times the column-encoder CTC reader's on one thread (batch 64).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnlab.models.readers.ctc import CTCConfig, CTCReader
from attnlab.models.registry import register


@dataclass
class CRNNConfig(CTCConfig):
    backbone: str = "vgg"  # its own encoder (encoder=NAME chooses another)
    stride: int = 4  # as the CTC reader's: about 4.4 columns per digit
    # Five stages, narrow first: 32 px strips leave one row; data.height must divide by 32.
    conv_channels: list[int] = field(default_factory=lambda: [16, 32, 64, 96, 128])
    layers: int = 2  # CRNN's two recurrent layers


@register("crnn", CRNNConfig, "CRNN, the field's standard: VGG conv encoder, 2-layer BiGRU, CTC")
class CRNNReader(CTCReader):
    pass
