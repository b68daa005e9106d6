"""A reader's declared parts (``Reader.PARTS``: part name -> the attributes that make it,
e.g. ``encoder``, ``decoder``, ``output``) and the parameters each holds: what
``train.freeze`` names and what the cost view counts by part."""

from __future__ import annotations

from torch import nn


def reader_parts(reader: type | nn.Module) -> dict[str, tuple[str, ...]]:
    """A reader class's (or reader's) declared parts."""
    return dict(getattr(reader, "PARTS", {}) or {})


def part_parameters(model: nn.Module, part: str) -> dict[str, nn.Parameter]:
    """The parameters of one declared part, by their names in the model's state."""
    out: dict[str, nn.Parameter] = {}
    for attr in reader_parts(model)[part]:
        value = getattr(model, attr, None)
        if isinstance(value, nn.Parameter):
            out[attr] = value
        elif isinstance(value, nn.Module):
            out.update({f"{attr}.{k}": p for k, p in value.named_parameters()})
    return out
