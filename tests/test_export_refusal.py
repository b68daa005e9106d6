"""``attnlab export`` asks the reader whether an ONNX graph can hold it (``Reader.ONNX_REFUSED``)
and never names a reader itself: a reader added later that cannot be traced is refused with
its own reason, and one that can is not refused for its name."""

from __future__ import annotations

from helpers.readers import tiny_config

from attnlab.export.graphs import refusal
from attnlab.models import registry


def _built(reader_class, name: str):
    cfg = tiny_config(name)
    return reader_class(registry.get(name).config(**cfg.model), cfg.data.height)


def test_a_reader_that_says_why_it_cannot_be_traced_is_refused_with_its_reason():
    class GrowingState(registry.get("attention").reader):
        ONNX_REFUSED = "its state grows by a row per step"

    reader = _built(GrowingState, "attention")
    assert refusal(reader) == (
        "the attention reader cannot be exported to ONNX: its state grows by a row per step"
    )
    assert refusal(_built(registry.get("attention").reader, "attention")) is None


def test_the_transformer_is_refused_for_its_cache_and_not_for_its_name():
    spec = registry.get("transformer")
    assert "key/value cache" in refusal(_built(spec.reader, "transformer"))

    class Traceable(spec.reader):
        ONNX_REFUSED = None

    assert refusal(_built(Traceable, "transformer")) is None  # step-wise: the export tries it
