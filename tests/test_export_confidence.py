"""ONNX export: the reference loop's confidence is torch's probability, for every exportable
reader, blank strips and the empty reading included; the parity check compares it.

Untrained tiny readers (the numbers mean nothing, the agreement does), each written by the
exporter's own ``write_graphs`` and read back by onnxruntime.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from helpers.exports import export_reader
from helpers.readers import strips, tiny_config, tiny_reader

from attnlab.export import graphs, parity
from attnlab.export.runtime import Export, ctc_log_prob
from attnlab.models import registry
from attnlab.models.ctc_decode import reading_log_prob
from attnlab.models.readers.ctc import CTCReader

# log-confidences of torch and the export: float32 sums of up to ~50 terms each within 1e-6
LOG_ATOL = 1e-3


def _exportable() -> list[str]:
    return [n for n in registry.names() if graphs.refusal(tiny_reader(n)) is None]


def _blank_favouring(reader: CTCReader) -> CTCReader:
    """A CTC reader that reads every strip as nothing, with confidence near 1 (the blank's
    bias raised): the empty reading of a well-trained reader on a blank strip."""
    with torch.no_grad():
        reader.classify.bias[-1] += 12.0
    return reader


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple]:
    """``{name: (reader, Export)}`` for every registered reader the exporter accepts, and
    ``ctc-blank`` (``_blank_favouring``)."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for name in _exportable():
        reader = tiny_reader(name)
        out[name] = reader
        if isinstance(reader, CTCReader):
            out[f"{name}-blank"] = _blank_favouring(tiny_reader(name))
    return {
        key: (r, Export(export_reader(r, tiny_config(r.name), root / key), threads=1))
        for key, r in out.items()
    }


def _batch():
    """Strips of 1 and 5 digits and blank strips (paper only) of three widths."""
    s = strips([1, 5], seed=2)
    h, w = s.images.shape[1], max(int(s.widths.max()), 96)
    images = torch.ones(5, h, w)
    images[:2, :, : s.images.shape[2]] = s.images
    widths = torch.cat([s.widths, torch.tensor([24, 60, 96])])
    return images, widths


def _log(p: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(p, 1e-30))  # a float32 product that underflowed to 0 is ~1e-45


def test_every_exportable_reader_is_exported_here():
    names = _exportable()
    assert "transformer" not in names and {"attention", "fixed", "ctc"} <= set(names)


def test_confidences_are_torchs_probabilities_on_every_exportable_reader(exported):
    images, widths = _batch()
    for key, (reader, model) in exported.items():
        with torch.no_grad():
            theirs = reader.read(images, widths)
        ours = model.read_batch(images.numpy(), widths.numpy())
        assert ours.texts == theirs.texts, key
        conf, want = np.asarray(ours.confidence, np.float64), theirs.confidence.double().numpy()
        assert ((conf >= 0) & (conf <= 1)).all(), (key, conf)
        assert np.allclose(_log(conf), _log(want), atol=LOG_ATOL, rtol=0), (key, conf, want)
        assert np.abs(conf - want).max() <= parity.CONFIDENCE_ATOL, key
    reader, model = exported["ctc-blank"]
    ours = model.read_batch(images.numpy(), widths.numpy())
    assert ours.texts == [""] * 5 and (ours.confidence[2:] > 0.9).all()  # the blank strips


def test_the_ctc_forward_algorithm_is_torchs_ctc_loss_for_every_label_and_length():
    """Every label of up to 3 characters of {0, 1} (the empty one, repeats) on 1-6 columns,
    against torch's ``ctc_loss``, including labels the columns cannot hold (probability 0)."""
    gen = torch.Generator().manual_seed(0)
    for t in range(1, 7):
        logp = torch.log_softmax(torch.randn(1, t, 3, generator=gen) * 2, -1)
        for n in range(4):
            for label in itertools.product([0, 1], repeat=n):
                targets = torch.tensor([list(label) or [0]])
                want = reading_log_prob(logp, torch.tensor([t]), targets, torch.tensor([n]))
                got = ctc_log_prob(logp[0].numpy(), np.array(label, dtype=np.int64), 2)
                assert np.isclose(got, float(want), atol=1e-5) or got == float(want) == -np.inf
    assert ctc_log_prob(np.zeros((0, 3), np.float32), np.array([], np.int64), 2) == 0.0


def test_parity_compares_the_confidences_it_records(exported):
    """A case whose readings and logits agree but whose confidences do not fails, naming
    the strip (what a wrong confidence, as the ctc export's of 4.4, now does)."""
    reader, model = exported["ctc-blank"]
    images, widths = _batch()
    case = parity.Case("blank strips", images, widths, [""] * len(widths))
    theirs = parity.torch_reading(reader, images, widths, 1)
    ours = model.read_batch(images.numpy(), widths.numpy(), trace=True)
    assert parity.compare(case, ours, theirs, 1e-4, model.kind)["passed"]
    ours.confidence = ours.confidence.copy()
    ours.confidence[3] += 0.01
    row = parity.compare(case, ours, theirs, 1e-4, model.kind)
    assert not row["passed"] and row["readings_differ"] == 0 and row["max_logit_diff"] <= 1e-4
    assert row["max_confidence_diff"] == pytest.approx(0.01, abs=1e-5)
    assert row["worst"].startswith("strip 3 (''): confidence")
