"""Runs -> variants: which runs are seeds of one configuration, and what each one is called.

Two runs are seeds of one variant only when their composed configs (``.hydra/config.yaml``)
are equal apart from ``seed`` and the keys in `attnlab.config.keys.NEUTRAL_KEYS`, the short
declared list of keys that cannot change a result (where it runs, how it reports progress).
Every other key counts, including keys a run's config lacks (an older attnlab): when in
doubt, a key counts.

A variant is named by its reader and the keys that differ among that reader's runs trained
on the same lengths, e.g. ``fixed · model.hidden=16``; with nothing swept but the seed it is
just the reader's name, as in the lab's default sweep. Two runs of one variant with the same
seed are one seed: the first (by path) counts, the other is listed as a duplicate.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from attnlab.config.experiment import patience_measure
from attnlab.config.keys import ADDED_DEFAULTS, NEUTRAL_KEYS, flatten
from attnlab.data.bank_keys import BANK_KEYS
from attnlab.errors import UserError
from attnlab.report.reader_styles import reader_key, shades
from attnlab.report.run_info import RunInfo
from attnlab.report.short_numbers import short_forms
from attnlab.runs import drawn

# The keys that do not make a variant: the seed (the seeds of a variant are counted, not
# compared) and the keys that cannot change a result (attnlab.config.keys).
IGNORED_KEYS = ("seed", *NEUTRAL_KEYS)
SEP = " · "  # between the reader and the keys of a variant's label
UNSET = "<unset>"  # a key that a run's config lacks


def flat_config(config_text: str) -> dict[str, str] | None:
    """A run's composed config as {dotted key: JSON value}, or None when it cannot be read."""
    try:
        cfg = OmegaConf.create(config_text)
    except Exception:  # a broken config is the run's problem, already reported
        return None
    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
    except Exception:  # an interpolation that no longer resolves: compare the text as written
        plain = OmegaConf.to_container(cfg, resolve=False)
    if not isinstance(plain, dict):
        return None
    model = plain.get("model")
    if isinstance(model, dict) and isinstance(model.get("name"), str):
        from attnlab.models import registry  # lazily: it imports torch and every reader

        try:  # a key its reader renamed since reads under its new name (an older run)
            plain["model"] = registry.renamed(model["name"], model)
        except UserError:  # an unknown reader, or both names: compared as written
            pass
    return flatten(plain)


# The seen lengths count as the set they name, however configured (a range or a set).
SEEN_KEYS = ("data.train_lengths", "data.train_length_set")


def identity(flat: dict[str, str], train: str) -> dict[str, str]:
    """The keys that make a variant: every key but the seed and `NEUTRAL_KEYS`, with the
    seen lengths as the set `train` names; a key added after the run was made
    (`ADDED_DEFAULTS`) counts with the value its absence means, not as unset."""
    flat = {**ADDED_DEFAULTS, **flat}
    out = {k: v for k, v in flat.items() if k not in IGNORED_KEYS and k not in SEEN_KEYS}
    # its measure chooses best.pt, and with train.patience when the run stops
    objective = json.loads(flat.get("train.objective", "null"))
    measure = patience_measure(objective if isinstance(objective, str) else None)
    out["train.objective"] = json.dumps(measure)
    out["seen lengths"] = json.dumps(train)
    return out


def show_value(text: str) -> str:
    """A JSON leaf as a Hydra override writes it: 16, 0.001, [1,8], fixed."""
    if text == UNSET:
        return text
    value = json.loads(text)
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def assign_variants(runs: list[RunInfo]) -> list[str]:
    """Set each run's variant (label, id, swept keys) and mark duplicate seeds.

    Returns one note per duplicate: the run that is counted once and the ones left out.
    """
    idents: dict[int, dict[str, str]] = {}
    for i, run in enumerate(runs):
        flat = flat_config(run.config_text) or {}
        idents[i] = identity(flat, run.train)
        blob = json.dumps(sorted(idents[i].items()))
        run.variant_id = hashlib.sha256(blob.encode()).hexdigest()[:12]
    by_line: dict[tuple[str, str], list[int]] = {}
    for i, run in enumerate(runs):
        by_line.setdefault((run.train, run.reader_name), []).append(i)
    sources = source_names({idents[i].get("init_from", "null") for i in idents})
    for members in by_line.values():
        keys = sorted({k for i in members for k in idents[i]})
        differ = [k for k in keys if len({idents[i].get(k, UNSET) for i in members}) > 1]
        for i in members:
            run = runs[i]
            run.swept = {k: show_value(idents[i].get(k, UNSET)) for k in differ}
            if run.swept.get("init_from") in sources:
                run.swept["init_from"] = sources[run.swept["init_from"]]
    shorten(runs)
    for run in runs:
        parts = [f"{k}={v}" for k, v in run.swept.items()]
        run.variant = SEP.join([run.reader_name, ", ".join(parts)]) if parts else run.reader_name
    return _mark_duplicates(runs)


def shorten(runs: list[RunInfo]) -> None:
    """Swept numbers in short form (report.short_numbers), one key's values across the
    report kept apart: a learning rate of 16 digits is shown with 3, or as many as needed."""
    for key in {k for r in runs for k in r.swept}:
        short = short_forms(r.swept[key] for r in runs if key in r.swept)
        for run in (r for r in runs if key in r.swept):
            run.swept[key] = short[run.swept[key]]


def source_names(values: Iterable[str]) -> dict[str, str]:
    """``init_from`` values (JSON leaves) -> short names: the started-from run's folder and
    its reader, e.g. ``synth/0 (attention)``, instead of a full path. The folder is named by
    as many trailing path parts as tell the sources apart (two at least when the last is a
    sweep job's number); a checkpoint file is named by its run's folder."""
    paths = {}
    for text in values:
        value = json.loads(text) if text != UNSET else None
        if isinstance(value, str) and value:
            path = Path(value)
            inside = path.suffix == ".pt" and path.parent.name == "checkpoints"
            run = path.parent.parent if inside else path
            paths[value] = run
    names = {}
    for value, run in paths.items():
        parts = run.parts
        depth = 2 if run.name.isdigit() and len(parts) > 1 else 1
        while depth < len(parts) and any(
            other != run and other.parts[-depth:] == parts[-depth:] for other in paths.values()
        ):
            depth += 1
        reader = _source_reader(run)
        tail = "/".join(parts[-depth:])
        names[value] = f"{tail} ({reader})" if reader else tail
    return names


def _source_reader(run: Path) -> str | None:
    """The reader a started-from run trained (its ``.hydra/config.yaml``), when it is there."""
    try:
        return str(OmegaConf.load(run / ".hydra" / "config.yaml").model.name)
    except Exception:  # moved, relative to another directory, unreadable: no reader named
        return None


def _mark_duplicates(runs: list[RunInfo]) -> list[str]:
    first: dict[tuple[str, Any], RunInfo] = {}
    notes = []
    for run in runs:  # runs come sorted by path: the first of a (variant, seed) counts
        if not run.evals:
            continue
        key = (run.variant_id, run.seed)
        if key not in first:
            first[key] = run
            continue
        kept = first[key]
        run.duplicate_of = kept.path
        run.problems.append(
            f"duplicate: same config and seed {run.seed} as {kept.path}; counted once, as that run"
        )
        notes.append(
            f"{run.variant} (train {run.train}): seed {run.seed} appears in {kept.path} and "
            f"{run.path} with the same config; it counts as one seed ({kept.path})."
        )
    return notes


def bank_notes(runs: list[RunInfo]) -> list[str]:
    """One line per training range whose counted runs (averaged as seeds, compared as
    variants) were drawn from different glyph banks, naming why (attnlab.runs.drawn); and
    one line per run whose drawn_by record cannot be read (an edited metrics.json), left
    out of that comparison."""
    notes, by_train = [], {}
    for run in runs:
        if why := drawn.unreadable(run.drawn_record):
            notes.append(f"{run.path}: unreadable record of what drew it ({why}); not compared")
    for run in counted(runs):
        if run.evals and not drawn.unreadable(run.drawn_record):
            by_train.setdefault(run.train, []).append(_drawing(run))
    lines = [drawn.bank_note(d, f"trained on lengths {t}") for t, d in by_train.items()]
    return notes + [line for line in lines if line]


def _drawing(run: RunInfo) -> drawn.Drawing:
    """What drew ``run``: its recorded bank and packages, and its config's bank keys."""
    record = run.drawn_record if isinstance(run.drawn_record, Mapping) else {}
    flat = flat_config(run.config_text) or {}
    keys = {f"data.{k}": flat.get(f"data.{k}", UNSET) for k in BANK_KEYS}
    return drawn.Drawing(record.get("glyph_bank"), record.get("packages") or {}, keys)


def counted(runs: Iterable[RunInfo]) -> list[RunInfo]:
    """The runs whose evaluations count: duplicates of a seed left out."""
    return [r for r in runs if r.duplicate_of is None]


def _natural(text: str) -> tuple:
    """ "model.hidden=16" < "model.hidden=64" < "model.hidden=256": numbers by value."""
    parts = re.split(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)", text)
    return tuple((0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts) if p)


def variant_key(label: str) -> tuple:
    """Sort key of a variant label: its reader in registry order, then its values."""
    reader, _, rest = label.partition(SEP)
    return (reader_key(reader), _natural(rest))


def ordered_variants(labels: Iterable[str]) -> list[str]:
    return sorted(set(labels), key=variant_key)


def reader_of(label: str) -> str:
    return label.partition(SEP)[0]


LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def styles(labels: Iterable[str]) -> dict[str, tuple[str, str]]:
    """(line style, marker) per variant: the i-th variant of a reader gets the i-th of each,
    so a reader keeps its colour and its variants are told apart by line and marker."""
    out: dict[str, tuple[str, str]] = {}
    count: dict[str, int] = {}
    for label in ordered_variants(labels):
        i = count.get(reader_of(label), 0)
        count[reader_of(label)] = i + 1
        out[label] = (LINE_STYLES[i % len(LINE_STYLES)], MARKERS[i % len(MARKERS)])
    return out


def variant_colours(labels: Iterable[str], colours: Mapping[str, str]) -> dict[str, str]:
    """A colour per variant: a reader with one variant keeps its colour, a reader with
    several gives each its own shade of that colour (reader_styles.shades)."""
    by_reader: dict[str, list[str]] = {}
    for label in ordered_variants(labels):
        by_reader.setdefault(reader_of(label), []).append(label)
    out = {}
    for reader, members in by_reader.items():
        base = colours.get(reader, "#57606a")
        out.update(zip(members, shades(base, len(members)), strict=True))
    return out


def summary_lines(runs: list[RunInfo]) -> list[str]:
    """One line per variant with evaluations: its label and its seeds (the sweep summary)."""
    assign_variants(runs)
    seeds: dict[tuple[str, str], set] = {}
    for run in counted(runs):
        if run.evals:
            seeds.setdefault((run.train, run.variant), set()).add(run.seed)
    return [
        f"  train {train} · {label}: {len(s)} seed{'' if len(s) == 1 else 's'} "
        f"({', '.join(map(str, sorted(s, key=str)))})"
        for (train, label), s in sorted(seeds.items(), key=lambda kv: variant_key(kv[0][1]))
    ]
