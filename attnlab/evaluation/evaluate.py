"""``attnlab eval``: readings -> per-length metrics, tables and attention maps.

``evaluate_run`` reads a trained run's fixed test sets (or a user folder) through
``attnlab.evaluation.inference.read_strips`` and writes ``eval/<name>/metrics_by_length.csv`` and
``.md``, the figures and attention maps (``attnlab.evaluation.eval_figures``), and
``eval.json`` last. The folder is
built under a hidden temporary name and renamed into place, so an evaluation that dies
leaves no partial ``eval/<name>``.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from attnlab.config import EvalConfig, RunTaskConfig, seen_lengths, span
from attnlab.data.dedup import CONTENT, pairs_digest
from attnlab.data.folder import LABELS, warn_stderr
from attnlab.data.lineage import trained_keys
from attnlab.data.recorded import folder_cache, held_out_cache, held_out_path
from attnlab.data.strips import StripBatch, StripSynth, fixed_set
from attnlab.errors import UserError
from attnlab.evaluation import explore, metrics, shared_samples
from attnlab.evaluation.analysis import threshold_rows
from attnlab.evaluation.eval_figures import draw_figures
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.records import confident_failures, readings_table, records_for
from attnlab.io import csv_text, write_text
from attnlab.io.folders import atomic_dir
from attnlab.models import registry
from attnlab.models.base import Reader
from attnlab.runs import locate, pretrained
from attnlab.runs.checkpoint import Checkpoint
from attnlab.runs.evaldir import STRIP_PRINTS, STRIPS_BY, EvalDir, EvalMeta
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.restore import restore
from attnlab.runs.rundir import EVAL
from attnlab.runtime import bf16_autocast

log = logging.getLogger(__name__)
registry.discover()


@dataclass
class EvalPlan:
    """One evaluation, decided before anything is written: the reader and what it reads
    (``_evaluate`` builds it; ``_write_evaluation`` reads the sets and writes the folder)."""

    reader: Reader
    device: torch.device
    ckpt: Checkpoint
    ckpt_path: Path
    sets: dict[int, tuple[StripBatch, list[str]]]  # length -> strips, their source names
    cfg: EvalConfig
    seen: list[int]
    source: str  # "synthetic" or "folder"
    name: str  # the folder's name under eval/
    digest: str | None = None  # a user folder's data (folder_digest)
    bf16: bool = False  # the autocast the run trained under
    onnx: str | None = None  # an export read through the reference loop instead of torch
    prints: dict[str, str] | None = None  # labelled strips: length -> their content (keys)


def eval_lengths(seen: list[int]) -> list[int]:
    """What ``attnlab eval`` reads when eval.lengths is unset: 1 to twice the top seen."""
    return list(range(1, 2 * max(seen) + 1))


def evaluate_run(
    run: Path | str,
    cfg: EvalConfig,
    which: str = "best",
    device: str = "auto",
    say=print,
    synthetic: bool = False,
    onnx: str | None = None,
) -> Path:
    """Evaluate a run (or checkpoint): tables, maps and eval.json under ``eval/<name>``.

    The run directory is locked meanwhile; eval.json is written last, so an evaluation
    without it is partial, and it records the checkpoint step that was read. ``synthetic``:
    read the fixed synthetic test sets even when the run trained on labelled strips (what a
    fine-tuned reader still reads of what it started from: forgetting). ``onnx``: an export
    of this checkpoint reads the sets instead (the reference loop), into eval/<name>-onnx.
    """
    EvalConfig.check(cfg)
    RunTaskConfig.check_run(which, device)
    if onnx and cfg.oracle_length:
        raise UserError("eval.oracle_length: the ONNX reference loop has no oracle lengths")
    with locate.held(run, which, "eval") as ckpt_path:
        return _evaluate(ckpt_path, cfg, device, say, synthetic, onnx)


def _evaluate(
    ckpt_path: Path, cfg: EvalConfig, device: str, say, synthetic=False, onnx=None
) -> Path:
    got = restore(ckpt_path, device)
    ckpt, reader, exp, dev = got.ckpt, got.reader, got.config, got.device
    if onnx:
        from attnlab.export.adapter import onnx_reader

        reader = onnx_reader(onnx, ckpt_path)
    seen = seen_lengths(exp.data)
    if not synthetic and (cfg.folder or ckpt.data_split is not None):
        trained = trained_keys(ckpt.data_split, ckpt.init_from)  # ancestors' strips too
        sets, name, digest, prints = _folder_sets(cfg, exp.data, ckpt.data_split, trained)
        source = "folder"
    else:
        sets, name, digest, prints = _synthetic_sets(cfg, exp.data, seen), cfg.name, None, None
        name, source = name or f"synthetic-{_decoding(cfg)}", "synthetic"
    if onnx and not cfg.name:
        name = f"{name}-onnx"
    target = locate.output_root(ckpt_path, EVAL) / name
    if pretrained.is_packaged(ckpt_path):  # no run directory: say where, before the tables
        say(f"the packaged reader has no run directory: this evaluation goes to {target}")
    refuse_other_data(EvalDir(target), cfg.folder, digest)
    bf16 = bf16_autocast(exp.train.bf16, dev)  # the autocast the run trained under
    plan = EvalPlan(reader, dev, ckpt, ckpt_path, sets, cfg, seen, source, name, digest, bf16, onnx)
    plan.prints = prints  # labelled strips: their content by length (_folder_sets)
    final = atomic_dir(target, lambda work: _write_evaluation(EvalDir(work), plan, say))
    say(f"evaluation written to {final}")
    return final


def _folder_sets(
    cfg: EvalConfig, data: Any, split: dict[str, Any] | None, trained: set[str] | None = None
):
    """Labelled strips by length with their source names, the evaluation's name, the
    data's digest and each length's fingerprint: eval.folder (a folder, list file or LMDB:
    data.sources), or by default the strips the run held out (data=folder), never trained
    on. ``trained``: the keys of the strips behind the weights (``lineage.trained_keys``); a
    folder holding any is refused. A length's fingerprint is of its strips' content keys and
    labels (``content_prints``): the same strips read at another height or crop print alike."""
    digest = None
    if cfg.folder:  # one loader for folders, list files and LMDBs (data.sources)
        cache = folder_cache(cfg.folder, data, cfg.crop, cfg.allow_outside, trained, warn_stderr)
        strips, files = cache.batch(range(len(cache))), cache.ids
        content = pairs_digest(cache.keys, cache.labels)  # however the strips were read
        digest = folder_digest(Path(cfg.folder), strips, content)
        name = f"folder-{Path(cfg.folder).resolve().name}-{digest}-{_decoding(cfg)}"
    else:
        cache = held_out_cache(data, split, warn_stderr, trained)
        strips, files = cache.batch(range(len(cache))), cache.ids
        name = f"held-out-{_decoding(cfg)}"
    by_length = _by_length(strips)
    sets = {n: (strips.select(idx), [files[i] for i in idx]) for n, idx in by_length.items()}
    return sets, cfg.name or name, digest, content_prints(cache.keys, cache.labels, by_length)


def content_prints(keys: list[str], labels: list[str], by_length: dict[int, list[int]]):
    """Per length: a fingerprint of its strips by content (``dedup.content_key``) and label,
    in no order: what two evaluations of one folder share however they read it."""
    return {
        str(n): pairs_digest([keys[i] for i in idx], [labels[i] for i in idx])
        for n, idx in by_length.items()
    }


def _synthetic_sets(
    cfg: EvalConfig, data: Any, seen: list[int]
) -> dict[int, tuple[StripBatch, list[str]]]:
    """The fixed synthetic test sets (drawn from data.eval_seed), eval.n strips a length."""
    lengths = eval_lengths(seen) if cfg.lengths is None else _range(cfg.lengths)
    synth = StripSynth(data)
    return {
        n: (fixed_set(synth, "test", n, cfg.n), [f"test-len{n:02d}#{i}" for i in range(cfg.n)])
        for n in lengths
    }


def folder_digest(folder: Path, strips: StripBatch | None = None, content: str | None = None):
    """8 hex digits naming a folder's data: its resolved path and its labels.csv, so that two
    folders of one name (a/strips, b/strips) or a folder relabelled get evaluations of their
    own instead of replacing each other's. An LMDB holds its labels and images inside, so
    its name covers the strips read from it: ``content`` (their content keys and labels, the
    same at any height or crop), else ``strips_digest``."""
    h = hashlib.sha256(str(folder.resolve()).encode("utf-8", "surrogateescape") + b"\0")
    labels = folder / LABELS if folder.is_dir() else folder  # a list file is its labels
    h.update(labels.read_bytes() if labels.is_file() else b"")
    if folder.is_dir() and not labels.is_file():  # an LMDB
        if content is not None or strips is not None:
            h.update((content or strips_digest(strips)).encode())
    return h.hexdigest()[:8]


def refuse_other_data(target: EvalDir, folder: str | None, digest: str | None) -> None:
    """An evaluation that exists under this name but read other data is not replaced."""
    if not target.meta_file.is_file():
        return
    try:
        meta = target.read_meta()
    except RunFileError:
        return  # unreadable: the report lists it; a new evaluation replaces it whole
    theirs = (meta.source, meta.extra.get("data_digest"))
    ours = ("folder" if folder else "synthetic", digest)
    if theirs[0] != ours[0] or (ours[1] is not None and theirs[1] != ours[1]):
        what = f"folder {meta.folder}" if meta.folder else f"{meta.source} strips"
        raise UserError(
            f"eval/{target.name} exists and read {what}, not this data: choose another "
            f"eval.name (or remove {target.path})"
        )


def _write_evaluation(out: EvalDir, plan: EvalPlan, say) -> None:
    """Read every set, then write tables, readings, figures, maps and eval.json (last)."""
    cfg, stride = plan.cfg, plan.reader.encoder.stride
    records, readings_by_length = _read_sets(plan)
    table = metrics.per_length_table(
        records, plan.seen, n_boot=cfg.n_boot, seed=0, ece_bins=cfg.ece_bins
    )
    shared = _write_tables(out, plan, records, table, say)
    if cfg.explore_n > 0:  # the report explorer's strips (explore.json)
        kept = explore.sample(
            plan.reader,
            plan.device,
            plan.sets,
            readings_by_length,
            cfg.explore_n,
            stride,
            plan.source == "synthetic",
        )
        explore.write(out.explore, kept)
    draw_figures(
        out, plan.reader, plan.device, plan.cfg, plan.seen, records, table, readings_by_length, say
    )
    out.write_meta(_meta(plan, shared))


def _decoding(cfg: EvalConfig) -> str:
    return "greedy" if cfg.beam <= 1 else f"beam{cfg.beam}"


def _read_sets(plan: EvalPlan) -> tuple[pd.DataFrame, dict[int, tuple[StripBatch, Any]]]:
    """Every set read: one record per strip, and each length's strips with their readings."""
    reader, dev, cfg, bf16 = plan.reader, plan.device, plan.cfg, plan.bf16
    frames, readings_by_length = [], {}
    for n, (strips, sources) in plan.sets.items():
        r = read_strips(reader, strips, dev, cfg.batch_size, cfg.beam, bf16=bf16)
        oracle = None
        if cfg.oracle_length:
            oracle = read_strips(
                reader, strips, dev, cfg.batch_size, cfg.beam, oracle=True, bf16=bf16
            )
        readings_by_length[n] = (strips, r)
        frames.append(
            records_for(
                strips,
                r,
                reader.encoder.stride,
                sources,
                plan.source == "synthetic",
                oracle=oracle,
                attention=getattr(reader, "ATTENTION", True),  # an ONNX adapter: as its reader's
            )
        )
    return pd.concat(frames, ignore_index=True), readings_by_length


def _write_tables(
    out: EvalDir, plan: EvalPlan, records, table, say
) -> shared_samples.SharedSamples | None:
    """The per-length table (Markdown and CSV), the readings, the confidence thresholds; the
    error by sample of strips that share samples (the folder's samples.csv), when measured."""
    cfg = plan.cfg
    title = f"{plan.reader.name} reader, {plan.source} strips, {_decoding(cfg)} ({plan.ckpt_path})"
    if plan.onnx:
        title += f", ONNX export {plan.onnx}"
    write_text(out.table_md, metrics.table_markdown(table, title) + "\n")
    write_text(out.table_csv, csv_text(table))
    write_text(out.readings, csv_text(readings_table(records)))
    thresholds = pd.DataFrame(
        threshold_rows(records["confidence"], records["correct"], tuple(cfg.thresholds))
    )
    write_text(out.thresholds, csv_text(thresholds))
    say(metrics.table_markdown(table, title))
    say(_thresholds_text(thresholds))
    shared = shared_samples.measure(
        cfg.folder, dict(zip(records["source"], records["correct"], strict=True))
    )
    if shared is not None:  # strips of a few samples: the intervals counting strips are too narrow
        say(shared_samples.line(shared))
    say(f"most confident failures (of {int((~records['correct']).sum())}):")
    for line in confident_failures(records, cfg.failures_shown):
        say(f"  {line}")
    return shared if isinstance(shared, shared_samples.SharedSamples) else None


def _meta(plan: EvalPlan, shared: shared_samples.SharedSamples | None) -> EvalMeta:
    """eval.json: what was read, how, from which checkpoint, the strips' fingerprints, and
    the error by sample of strips that share samples."""
    cfg, ckpt, source = plan.cfg, plan.ckpt, plan.source
    return EvalMeta(
        name=plan.name,
        source=source,
        # the path actually read: eval.folder, else the run's data.val_path or data.path
        folder=str(cfg.folder) if cfg.folder else _read_from(ckpt.data_split),
        decoding=_decoding(cfg),
        reader=plan.reader.name,
        seen_lengths=plan.seen,
        lengths=sorted(plan.sets),
        n_per_length=None if source == "folder" else cfg.n,
        checkpoint=str(plan.ckpt_path),
        step=int(ckpt.step),
        extra={
            "oracle_length": bool(cfg.oracle_length),
            "ece_bins": cfg.ece_bins,
            **({"crop": bool(cfg.crop)} if source == "folder" else {}),
            **({"data_digest": plan.digest} if plan.digest else {}),
            **({"onnx": str(plan.onnx)} if plan.onnx else {}),
            # what the report checks before it pairs two evaluations strip by strip: labelled
            # strips by content (however read), synthetic ones by their pixels
            STRIP_PRINTS: plan.prints
            or {str(n): strips_digest(s) for n, (s, _) in plan.sets.items()},
            **({STRIPS_BY: CONTENT} if plan.prints else {}),
            **({shared_samples.RECORD: shared.record()} if shared else {}),
        },
    )


def _read_from(split: dict[str, Any] | None) -> str | None:
    """The held-out strips' path: the run's data.val_path when it had one, else data.path."""
    return held_out_path(split) if split else None


def strips_digest(strips: StripBatch) -> str:
    """A fingerprint of a set of strips: pixels, widths and labels (sha256, 16 hex digits).
    Two evaluations with equal fingerprints at a length read the very same strips there."""
    h = hashlib.sha256()
    h.update(strips.images.contiguous().numpy().tobytes())
    h.update(strips.widths.numpy().tobytes())
    h.update("\n".join(strips.labels).encode())
    return h.hexdigest()[:16]


def _thresholds_text(rows: pd.DataFrame) -> str:
    parts = [
        f">= {r.threshold:g}: keeps {100 * r.kept:.1f}%, "
        + ("exact n/a" if pd.isna(r.exact_acc_kept) else f"exact {100 * r.exact_acc_kept:.1f}%")
        for r in rows.itertuples(index=False)
    ]
    return "rejecting low confidence: " + "; ".join(parts)


def _by_length(strips: StripBatch) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(strips.labels):
        groups.setdefault(len(label), []).append(i)
    return dict(sorted(groups.items()))


def _range(pair) -> list[int]:
    lo, hi = span(pair, "eval.lengths")
    return list(range(lo, hi + 1))
