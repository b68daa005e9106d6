"""The parity check of an export: torch's reader and the reference loop on the same strips.

Strips: ``PER_LENGTH`` fixed test strips (``data.eval_seed``, the "test" sets of ``attnlab
eval``) of every length 1-16, seen and unseen, read one at a time and 64 at a time; the
same 64 padded with paper beyond their widest strip (columns no strip has); one strip of each
length with 40 columns of paper added to its real width, and each stretched to 1.5 times its
width (widths the reader never trained on); and the 64 again with beam search (step-wise
readers); and blank strips (paper only, three widths), which a reader should read as
nothing. The readings must be identical, every logit of every step read (a CTC export:
every log posterior of every real column) within ``atol`` of torch's, and every confidence
(a probability) within ``confidence_atol(atol)`` of torch's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.data.strips import StripSynth, fixed_set, pad_strips
from attnlab.errors import UserError
from attnlab.export.runtime import Export, Results
from attnlab.models.base import Reader
from attnlab.models.stepwise import StepwiseReader
from attnlab.models.stepwise_search import greedy

LENGTHS = range(1, 17)
PER_LENGTH = 8
BATCH = 64
BEAM = 3
EXTRA_COLUMNS = 40
BLANK_WIDTHS = (24, 96, 320)  # blank strips: short, typical and long
CONFIDENCE_ATOL = 1e-3


def confidence_atol(atol: float) -> float:
    """How far a confidence may be from torch's: ``CONFIDENCE_ATOL``, or ``atol`` when that is
    larger (logits ``atol`` apart move a product of a few probabilities about that much)."""
    return max(CONFIDENCE_ATOL, atol)


class ParityError(UserError):
    """The export reads differently from its reader (one line naming the worst case)."""


@dataclass
class Case:
    name: str
    images: torch.Tensor  # (B, H, W) padded with paper
    widths: torch.Tensor  # (B,)
    labels: list[str]
    beam: int = 1


class _Recorder:
    """The reader as ``stepwise_search.greedy`` sees it, keeping every step's logits."""

    def __init__(self, reader: StepwiseReader):
        self.reader, self.charset, self.logits = reader, reader.charset, []

    def init_state(self, memory):
        return self.reader.init_state(memory)

    def step(self, memory, state, prev):
        out = self.reader.step(memory, state, prev)
        self.logits.append(out[0].float())
        return out


@torch.no_grad()
def torch_reading(reader: Reader, images, widths, beam: int):
    """Torch's texts, confidences and logits ((B, S, V) per step, or CTC (B, T, C))."""
    if beam > 1:
        out = reader.read(images, widths, beam)
        return out.texts, out.confidence.float().numpy(), None
    if isinstance(reader, StepwiseReader):
        rec = _Recorder(reader)
        out = greedy(rec, reader.decoding_memory(reader.encode(images, widths)))
        return out.texts, out.confidence.float().numpy(), torch.stack(rec.logits, 1).numpy()
    out = reader.read(images, widths)
    logp, _ = reader.log_probs(images, widths)
    return out.texts, out.confidence.float().numpy(), logp.numpy()


def cases(synth: StripSynth, stepwise: bool, per_length: int = PER_LENGTH) -> list[Case]:
    sets = [fixed_set(synth, "test", n, per_length) for n in LENGTHS]
    labels = [t for s in sets for t in s.labels]
    strips = [s.images[i, :, : int(s.widths[i])] for s in sets for i in range(len(s))]
    out = [
        Case(f"length {len(t)} strip {i % per_length}, batch 1", *_pad([im]), [t])
        for i, (im, t) in enumerate(zip(strips, labels, strict=True))
    ]
    for start in range(0, len(strips), BATCH):
        chunk, tl = strips[start : start + BATCH], labels[start : start + BATCH]
        out.append(
            Case(f"strips {start}-{start + len(chunk) - 1}, batch {BATCH}", *_pad(chunk), tl)
        )
        images, widths = _pad(chunk)
        wider = torch.nn.functional.pad(images, (0, 3 * synth.data.height), value=1.0)
        out.append(
            Case(f"strips {start}-{start + len(chunk) - 1}, padded wider", wider, widths, tl)
        )
        if stepwise:
            out.append(
                Case(
                    f"strips {start}-{start + len(chunk) - 1}, beam {BEAM}",
                    images,
                    widths,
                    tl,
                    BEAM,
                )
            )
    ones = [i * per_length for i in range(len(sets))]
    paper = [torch.nn.functional.pad(strips[i], (0, EXTRA_COLUMNS), value=1.0) for i in ones]
    stretched = [_stretch(strips[i], 1.5) for i in ones]
    out.append(Case(f"+{EXTRA_COLUMNS} paper columns", *_pad(paper), [labels[i] for i in ones]))
    out.append(Case("stretched 1.5x", *_pad(stretched), [labels[i] for i in ones]))
    blank = [torch.ones(synth.data.height, w) for w in BLANK_WIDTHS]
    out.append(Case("blank strips", *_pad(blank), [""] * len(blank)))
    return out


def _pad(images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    s = pad_strips(images, [""] * len(images), torch.zeros(len(images), 1, 2, dtype=torch.long))
    return s.images, s.widths


def _stretch(image: torch.Tensor, factor: float) -> torch.Tensor:
    h, w = image.shape
    out = torch.nn.functional.interpolate(
        image[None, None], size=(h, round(w * factor)), mode="bilinear", align_corners=False
    )
    return out[0, 0].clamp(0, 1)


def compare(case: Case, ours: Results, theirs, atol: float, kind: str) -> dict:
    texts, conf, logits = theirs
    row = {"case": case.name, "strips": len(case.labels), "beam": case.beam}
    differ = [i for i, (a, b) in enumerate(zip(texts, ours.texts, strict=True)) if a != b]
    row["readings_differ"] = len(differ)
    row["max_confidence_diff"] = float(np.abs(conf - ours.confidence).max())
    row["max_logit_diff"], row["worst"] = 0.0, ""
    if differ:
        i = differ[0]
        row["worst"] = f"strip {i}: torch read {texts[i]!r}, the export {ours.texts[i]!r}"
    elif logits is not None:
        # (B, S, V) or (B, T, C); columns the export has beyond torch's are padding
        diff = np.abs(logits - ours.logits[:, : logits.shape[1]])
        if kind == "ctc":
            real = np.arange(diff.shape[1])[None] < ours.columns[:, None]
        else:
            real = np.arange(diff.shape[1])[None] < np.array([len(t) + 1 for t in texts])[:, None]
        diff = np.where(real[..., None], diff, 0.0)
        i, s, _ = np.unravel_index(int(diff.argmax()), diff.shape)
        row["max_logit_diff"] = float(diff.max())
        row["worst"] = f"strip {i} ({texts[i]!r}), {'column' if kind == 'ctc' else 'step'} {s}"
    gap = np.abs(conf - ours.confidence)
    if not differ and row["max_logit_diff"] <= atol and not (gap.max() <= confidence_atol(atol)):
        i = int(np.nan_to_num(gap, nan=np.inf).argmax())
        row["worst"] = (
            f"strip {i} ({texts[i]!r}): confidence {conf[i]:.4g} (torch), "
            f"{ours.confidence[i]:.4g} (the export)"
        )
    row["passed"] = (
        not differ
        and row["max_logit_diff"] <= atol
        and row["max_confidence_diff"] <= confidence_atol(atol)
    )
    return row


def check(
    reader: Reader,
    synth: StripSynth,
    export: Export,
    atol: float = 1e-4,
    per_length: int = PER_LENGTH,
) -> dict:
    """Run every case; the figures (parity.json) or a ParityError naming the worst case.
    ``per_length``: strips of each length (fewer only in tests of untrained readers, whose
    readings run to the step limit)."""
    started = time.perf_counter()
    reader = reader.cpu().eval()
    rows = []
    for case in cases(synth, isinstance(reader, StepwiseReader), per_length):
        theirs = torch_reading(reader, case.images, case.widths, case.beam)
        ours = export.read_batch(case.images.numpy(), case.widths.numpy(), case.beam, trace=True)
        rows.append(compare(case, ours, theirs, atol, export.kind))
    failed = [r for r in rows if not r["passed"]]
    figures = {
        "atol": atol,
        "lengths": [min(LENGTHS), max(LENGTHS)],
        "strips_per_length": per_length,
        "cases": len(rows),
        "readings_compared": sum(r["strips"] for r in rows),
        "readings_differ": sum(r["readings_differ"] for r in rows),
        "max_logit_diff": max(r["max_logit_diff"] for r in rows),
        "max_confidence_diff": max(r["max_confidence_diff"] for r in rows),
        "confidence_atol": confidence_atol(atol),
        "seconds": round(time.perf_counter() - started, 2),
        "passed": not failed,
        "by_case": rows,
    }
    if failed:
        worst = max(failed, key=lambda r: _badness(r, atol))
        if worst["readings_differ"]:
            what = f"{worst['readings_differ']} of {worst['strips']} readings differ"
        elif worst["max_logit_diff"] > atol:
            what = f"logits differ by {worst['max_logit_diff']:.3g} (over {atol:g})"
        else:
            over = confidence_atol(atol)
            what = f"confidences differ by {worst['max_confidence_diff']:.3g} (over {over:g})"
        raise ParityError(
            f"parity check failed, nothing written: {what} in case '{worst['case']}', worst at "
            f"{worst['worst']} ({len(failed)} of {len(rows)} cases failed)"
        )
    return figures


def _badness(row: dict, atol: float) -> tuple:
    """A failed case's rank: differing readings, then logits over ``atol``, then sizes."""
    return (
        row["readings_differ"],
        row["max_logit_diff"] > atol,
        row["max_logit_diff"],
        row["max_confidence_diff"],
    )
