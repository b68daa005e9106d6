"""Closed-form forward FLOP counts: the vocabulary the readers' own counts are written in.

A count is a list of ``Term``: the FLOPs one module does for one strip, which part of the
reader it belongs to (``Reader.PARTS``: encoder, decoder, output), and how it grows with
the strip (the chapter's cost view, section 8.8): once per ``column``, once per output
``step``, once per ``pair`` (columns x steps, or steps x steps: the attention scores and
weighted sums) or once per ``strip``. FLOPs count matrix products and convolutions as
``torch.utils.flop_counter.FlopCounterMode`` does (2 per multiply-add; biases, activations,
softmax and element-wise work not counted), so a term can be checked against the counter on
the module it names (``module``: its attribute path in the reader).
"""

from __future__ import annotations

from dataclasses import dataclass

# How each kind of term grows when the strip doubles (columns and steps both double): the
# chapter's prediction. Per-column and per-step work doubles, pairwise work quadruples.
GROWTH = {"strip": 1, "column": 2, "step": 2, "pair": 4}


@dataclass(frozen=True)
class Term:
    name: str  # what it is: "BiGRU", "scores and weighted sums", ...
    part: str  # the reader's part (Reader.PARTS)
    module: str  # the module the counter attributes it to, e.g. "encoder.gru"
    growth: str  # a key of GROWTH
    flops: int


def linear(rows: int, fan_in: int, fan_out: int) -> int:
    """``rows`` vectors through an (fan_in -> fan_out) linear layer."""
    return 2 * rows * fan_in * fan_out


def gru(steps: int, input_size: int, hidden: int, layers: int = 1, directions: int = 1) -> int:
    """A GRU over ``steps`` positions: per position, layer and direction the input and the
    state each pass through their 3 gates (reset, update, new)."""
    total, size = 0, input_size
    for _ in range(layers):
        total += directions * steps * (linear(1, size, 3 * hidden) + linear(1, hidden, 3 * hidden))
        size = directions * hidden
    return total


def gru_cell(steps: int, input_size: int, hidden: int) -> int:
    """``steps`` calls of a GRU cell (one layer, one direction)."""
    return gru(steps, input_size, hidden)


def conv1d(positions: int, in_channels: int, out_channels: int, kernel: int) -> int:
    return 2 * positions * in_channels * out_channels * kernel


def conv2d(outputs: int, in_channels: int, out_channels: int, kernel: int) -> int:
    """``outputs`` output positions (height x width) of a square ``kernel``."""
    return 2 * outputs * in_channels * out_channels * kernel * kernel
