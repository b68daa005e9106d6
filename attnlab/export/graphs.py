"""A trained reader as ONNX graphs (torch's TorchScript exporter, opset 17).

A step-wise reader becomes two graphs: ``encoder`` (images, widths -> the fields of its
``Memory`` and the decoder's first state) and ``step`` (the memory fields, state, previous
token -> logits, next state and, where the reader has them, the step's attention weights).
The CTC reader becomes one graph, ``ctc`` (images, widths -> log posteriors, columns).
Batch, width, column and state axes are dynamic.

The readers' own column encoder is written for training: it counts columns with a Python
integer, runs the per-column layers on the real columns only and packs the BiGRU's input,
none of which a trace keeps dynamic. ``ExportColumns`` computes the same states from the
same parameters in a form a trace keeps (columns from the image's width, every column
computed then masked, each GRU direction run on its own with the backward one on each row
reversed within its length). The parity check (``attnlab.export.parity``) shows the two agree.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import fields
from pathlib import Path

import torch
from torch import nn

from attnlab.errors import UserError
from attnlab.models.base import Reader
from attnlab.models.encoders.column import ColumnEncoder
from attnlab.models.readers.ctc import CTCReader
from attnlab.models.stepwise import StepwiseReader

OPSET = 17
ENCODER, STEP, CTC = "encoder", "step", "ctc"
STATE, PREV, NEXT, LOGITS, WEIGHTS = "state", "prev", "next_state", "logits", "weights"
IMAGES, WIDTHS, LOG_PROBS, COLUMNS = "images", "widths", "log_probs", "columns"


def refusal(reader: Reader) -> str | None:
    """Why ``reader`` cannot be exported (None: it can): the reason the reader itself gives
    (``Reader.ONNX_REFUSED``: a decoder state no fixed-rank tensor of one step's graph holds),
    or that it is neither step-wise nor the CTC reader."""
    if reader.ONNX_REFUSED:
        return f"the {reader.name} reader cannot be exported to ONNX: {reader.ONNX_REFUSED}"
    if not isinstance(reader, (StepwiseReader, CTCReader)):
        return (
            f"the {reader.name} reader cannot be exported to ONNX: it is neither step-wise "
            "nor the CTC reader"
        )
    return None


def _uni(gru: nn.GRU, layer: int, suffix: str) -> nn.GRU:
    """One direction of one layer of ``gru`` as a unidirectional GRU with its weights."""
    one = nn.GRU(getattr(gru, f"weight_ih_l{layer}{suffix}").shape[1], gru.hidden_size, 1)
    one.batch_first = True
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(one, f"{name}_l0").copy_(getattr(gru, f"{name}_l{layer}{suffix}"))
    return one


def _index(row: torch.Tensor) -> torch.Tensor:
    """0, 1, ... len(row) - 1 as int64: an ``arange`` whose length the graph keeps dynamic.
    ``torch.arange(x.shape[i])`` and ``ones_like`` of an intermediate tensor end up as
    constants of the example's size; ones made from the row's values cannot."""
    ones = (row.isnan() | ~row.isnan()).long()
    return ones.cumsum(0) - 1


class ExportColumns(nn.Module):
    """``ColumnEncoder`` in a traceable form (same parameters, same states); see the module
    docstring. Images must be padded to at least their widest strip."""

    def __init__(self, enc: ColumnEncoder):
        super().__init__()
        self.enc = enc
        self.stride, self.hidden = enc.stride, enc.hidden
        self.gru = enc.gru  # None for a reader that encodes the columns itself
        if enc.gru is not None:
            layers = range(enc.gru.num_layers)
            self.forward_layers = nn.ModuleList(_uni(enc.gru, i, "") for i in layers)
            self.backward_layers = nn.ModuleList(_uni(enc.gru, i, "_reverse") for i in layers)

    @property
    def state_size(self) -> int:
        return 2 * self.hidden

    def column_lengths(self, widths: torch.Tensor) -> torch.Tensor:
        return self.enc.column_lengths(widths)

    def features(self, images: torch.Tensor, widths: torch.Tensor):
        enc, s = self.enc, self.stride
        if not isinstance(enc, ColumnEncoder):  # the conv encoders trace as they are
            return enc.features(images, widths, traced=True)
        w = images.shape[2]  # a trace keeps this one dynamic (an input's)
        lengths = self.column_lengths(widths)  # (B,)
        x = 1.0 - images  # ink
        if enc.normalize:
            real = (_index(images[0, 0]) < widths[:, None])[:, None, :]  # (B, 1, W)
            lo = x.masked_fill(~real, float("inf")).amin(dim=(1, 2), keepdim=True)
            hi = x.masked_fill(~real, float("-inf")).amax(dim=(1, 2), keepdim=True)
            x = ((x - lo) / (hi - lo).clamp(min=0.1)).clamp(0, 1) * real
        x = nn.functional.pad(x, (0, (s - w % s) % s))[:, None]  # (B, 1, H, T*s)
        keep = lengths * s
        for conv, pool in zip(enc.convs, enc.width_pools, strict=True):
            x = torch.relu(conv(x))
            keep = torch.div(keep, pool, rounding_mode="floor")
            cols = _index(x[0, 0, 0])
            x = x * (cols < keep[:, None]).to(x.dtype)[:, None, None, :]
        if enc.column_convs:
            y = x.flatten(1, 2)
            real = (_index(y[0, 0]) < keep[:, None]).to(y.dtype)[:, None, :]
            for conv in enc.column_convs:
                y = torch.relu(conv(y)) * real
            x = y[:, :, None, :]
        if enc.convs:
            feats = x.permute(0, 3, 1, 2).flatten(2)  # (B, T, C*H')
        else:  # (B, 1, H, T*s) -> (B, T, H*s), as ColumnEncoder.features stacks them
            feats = x.flatten(1, 2).unflatten(2, (-1, s)).permute(0, 2, 1, 3).flatten(2)
        real = _index(feats[0, :, 0])[None, :] < lengths[:, None]  # (B, T)
        out = enc.norm(torch.relu(enc.proj(feats))) * real[..., None].to(feats.dtype)
        return out, lengths

    def forward(self, images: torch.Tensor, widths: torch.Tensor):
        feats, lengths = self.features(images, widths)  # (B, T, 2H)
        j = _index(feats[0, :, 0])[None, :]  # (1, T)
        real = j < lengths[:, None]  # (B, T)
        back = torch.where(real, lengths[:, None] - 1 - j, j)  # each row reversed in its length
        index = back[..., None].expand(-1, -1, self.hidden)
        x = feats
        for fwd, bwd in zip(self.forward_layers, self.backward_layers, strict=True):
            out_f, _ = fwd(x)  # (B, T, H); past a row's length: masked below
            rev = x.gather(1, back[..., None].expand(-1, -1, x.shape[-1]))
            out_r, _ = bwd(rev)  # (B, T, H) in reversed order
            out_b = out_r.gather(1, index)
            x = torch.cat([out_f, out_b], -1) * real[..., None].to(feats.dtype)
        last = (lengths - 1).clamp(min=0)[:, None, None].expand(-1, 1, self.hidden)
        summary = torch.cat([out_f.gather(1, last)[:, 0], out_r.gather(1, last)[:, 0]], -1)
        return x, lengths, summary


def export_form(reader: Reader) -> Reader:
    """A copy of ``reader`` (eval mode, CPU) whose column encoder is ``ExportColumns``."""
    twin = copy.deepcopy(reader).cpu().eval()
    twin.encoder = ExportColumns(twin.encoder)
    return twin


def memory_names(reader: StepwiseReader, images, widths) -> list[str]:
    """The fields of the reader's decoding memory that the step reads (None ones dropped)."""
    memory = reader.decoding_memory(reader.encode(images, widths))
    return [f.name for f in fields(memory) if getattr(memory, f.name) is not None]


class EncoderGraph(nn.Module):
    def __init__(self, reader: StepwiseReader, names: list[str]):
        super().__init__()
        self.reader, self.names = reader, names

    def forward(self, images, widths):
        memory = self.reader.decoding_memory(self.reader.encode(images, widths))
        return (*(getattr(memory, n) for n in self.names), self.reader.init_state(memory))


class StepGraph(nn.Module):
    def __init__(self, reader: StepwiseReader, names: list[str], memory_type: type):
        super().__init__()
        self.reader, self.names, self.memory_type = reader, names, memory_type

    def forward(self, *args):
        *values, state, prev = args
        given = dict(zip(self.names, values, strict=True))
        memory = self.memory_type(**{f.name: given.get(f.name) for f in fields(self.memory_type)})
        logits, state, weights = self.reader.step(memory, state, prev)
        return (logits.float(), state) if weights is None else (logits.float(), state, weights)


class CTCGraph(nn.Module):
    def __init__(self, reader: CTCReader):
        super().__init__()
        self.reader = reader

    def forward(self, images, widths):
        return self.reader.log_probs(images, widths)


def _example(height: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two strips of different widths: the trace sees a padded row."""
    images = torch.ones(2, height, 96)
    images[:, height // 4 : -height // 4, 8:40] = 0.2
    return images, torch.tensor([96, 57])


def _axes(names: list[str], ranks: dict[str, int]) -> dict[str, dict[int, str]]:
    """Every axis of every input and output is dynamic (batch, width, columns, state)."""
    return {n: {i: f"{n}_{i}" for i in range(ranks[n])} for n in names}


def _export(module: nn.Module, args: tuple, path: Path, ins: list[str], outs: list[str]):
    with torch.no_grad():
        results = module(*args)
    results = results if isinstance(results, tuple) else (results,)
    ranks = {n: a.dim() for n, a in zip(ins, args, strict=True)}
    ranks |= {n: r.dim() for n, r in zip(outs, results, strict=True)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on constants it folds
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=ins,
            output_names=outs,
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes=_axes(ins + outs, ranks),
            do_constant_folding=False,
        )
    return results


def export_graphs(reader: Reader, height: int, folder: Path) -> dict:
    """Write the reader's graphs into ``folder``; returns the sidecar's ``graphs`` part
    (file, inputs and outputs of each) plus ``memory`` and ``weights`` for a step-wise
    reader. A reader that cannot be exported is refused (UserError) before anything."""
    why = refusal(reader)
    if why:
        raise UserError(why)
    twin = export_form(reader)
    images, widths = _example(height)
    if isinstance(twin, CTCReader):
        outs = [LOG_PROBS, COLUMNS]
        _export(CTCGraph(twin), (images, widths), folder / f"{CTC}.onnx", [IMAGES, WIDTHS], outs)
        return {"kind": "ctc", "graphs": {CTC: _entry(CTC, [IMAGES, WIDTHS], outs)}}
    names = memory_names(twin, images, widths)
    enc_outs = [*names, STATE]
    first = _export(
        EncoderGraph(twin, names),
        (images, widths),
        folder / f"{ENCODER}.onnx",
        [IMAGES, WIDTHS],
        enc_outs,
    )
    memory_type = type(twin.encode(images, widths))
    *memory, state = first
    prev = torch.full((images.shape[0],), 1, dtype=torch.long)
    step = StepGraph(twin, names, memory_type)
    with torch.no_grad():
        has_weights = len(step(*memory, state, prev)) == 3
    step_outs = [LOGITS, NEXT, *([WEIGHTS] if has_weights else [])]
    step_ins = [*names, STATE, PREV]
    _export(step, (*memory, state, prev), folder / f"{STEP}.onnx", step_ins, step_outs)
    return {
        "kind": "stepwise",
        "memory": names,
        "weights": has_weights,
        "graphs": {
            ENCODER: _entry(ENCODER, [IMAGES, WIDTHS], enc_outs),
            STEP: _entry(STEP, step_ins, step_outs),
        },
    }


def _entry(name: str, ins: list[str], outs: list[str]) -> dict:
    return {"file": f"{name}.onnx", "inputs": ins, "outputs": outs}


def tie(path: Path, metadata: dict[str, str]) -> None:
    """Write ``metadata`` into the graph file's ONNX metadata (``metadata_props``), which
    the reference loop compares with the sidecar before it loads the graph."""
    import onnx

    model = onnx.load(str(path))
    onnx.helper.set_model_props(model, metadata)
    onnx.save(model, str(path))
