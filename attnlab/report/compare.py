"""Paired differences between two variants read on the same strips: comparisons.csv.

Every fixed evaluation set is drawn from ``data.eval_seed``, so two runs evaluated on it read
the same strips, and a difference can be measured strip by strip. For variants A and B of
one training range and evaluation, per length and for the seen and unseen totals:

- the difference A - B in exact accuracy and in CER (corpus CER of each seed's run, as in
  the tables), averaged over seeds;
- a 95% paired bootstrap interval: each resample draws the seed pairs with replacement and,
  within each length, the strips with replacement; a drawn strip counts for A and for B
  together (the pairing), and for every seed pair alike (the same strips);
- McNemar's exact test of exact accuracy: strips read right by A and wrong by B (b) against
  the reverse (c), over every seed pair, two-sided binomial p-value.

Seeds are paired by seed value where both variants have it, otherwise in seed order (the
`pairing` column says which). A pairing of evaluations that did not read the same strips is
refused: their ``eval.json`` strip fingerprints must be equal at every length compared, and
their readings must name the same strips with the same truths. Labelled strips print by
content and label (``dedup.content_key``), so one folder read at two heights pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attnlab.evaluation.metrics import TOTAL
from attnlab.report.discover import RunInfo
from attnlab.report.reader_styles import ordered
from attnlab.report.variants import ordered_variants
from attnlab.runs.evaldir import STRIP_PRINTS, STRIPS_BY
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.rundir import RunDir

N_BOOT = 2000
BOOT_SEED = 0

COLUMNS = [
    "train",
    "eval",
    "a",
    "b",
    "length",
    "split",
    "n_pairs",
    "n_strips",
    "pairing",
    "exact_a",
    "exact_b",
    "exact_diff",
    "exact_diff_lo",
    "exact_diff_hi",
    "cer_a",
    "cer_b",
    "cer_diff",
    "cer_diff_lo",
    "cer_diff_hi",
    "mcnemar_b",
    "mcnemar_c",
    "mcnemar_p",
]
METHOD = (
    "Paired differences A - B on the same strips (every run reads the fixed test set drawn "
    f"from data.eval_seed). Interval: 95% bootstrap ({N_BOOT} resamples of the seed pairs and, "
    "within each length, of the strips, each strip counting for A and B together). CER is "
    "each seed's corpus CER (edits / characters). McNemar: exact two-sided binomial test "
    "of b (A right, B wrong) against c (A wrong, B right) over all seed pairs."
)


class CompareRefused(Exception):
    """Two evaluations that cannot be paired, with the reason in one line."""


@dataclass
class Side:
    """One variant's runs in one evaluation, their readings by strip."""

    variant: str
    runs: list[RunInfo]


def readings(run: RunInfo, eval_name: str) -> pd.DataFrame:
    """A run's readings.csv of one evaluation by source, its text columns as str; with
    `edits` and `chars` added. Unreadable or lacking a column: CompareRefused."""
    ev = RunDir(run.path).eval_dir(eval_name)
    try:
        frame = pd.read_csv(
            ev.readings,
            dtype={"source": str, "truth": str, "reading": str, **dict.fromkeys(COUNTS, str)},
            keep_default_na=False,
        )
    except (OSError, ValueError) as exc:
        raise CompareRefused(f"{ev.readings}: unreadable ({exc})") from exc
    missing = {"source", "length", "truth", "correct", "sub", "ins", "del"} - set(frame.columns)
    if missing:
        raise CompareRefused(f"{ev.readings}: lacks {', '.join(sorted(missing))}")
    if (cell := _bad_reading(frame)) is not None:
        raise CompareRefused(f"{ev.readings}: {cell}: not read")
    frame["correct"] = frame["correct"].astype(str).str.lower().eq("true")
    frame[COUNTS] = frame[COUNTS].astype(int)
    frame["edits"] = frame[["sub", "ins", "del"]].sum(axis=1)
    frame["chars"] = frame["truth"].str.len()
    return frame.set_index("source")


COUNTS = ["length", "sub", "ins", "del"]  # readings.csv's whole-number columns


def _bad_reading(frame: pd.DataFrame) -> str | None:
    """The first cell of readings.csv that is not what the evaluation writes there (a
    count that is not a whole number >= 0, a ``correct`` that is not True or False), as
    "line L, column C: 'v' is not ..."; None when every cell is sound."""
    for column in COUNTS:
        text = frame[column].astype(str).str.strip()
        bad = ~text.str.fullmatch(r"\d+")
        if bad.any():
            row = int(bad.to_numpy().argmax())
            return f"line {row + 2}, column {column}: {text.iloc[row]!r} is not a whole number"
    flags = frame["correct"].astype(str).str.strip()
    bad = ~flags.str.lower().isin(["true", "false"])
    if bad.any():
        row = int(bad.to_numpy().argmax())
        return f"line {row + 2}, column correct: {flags.iloc[row]!r} is not True or False"
    return None


def _fingerprints(run: RunInfo, eval_name: str) -> tuple[dict[str, str], str]:
    meta = run.eval_meta.get(eval_name)
    if meta is None:
        try:
            meta = RunDir(run.path).eval_dir(eval_name).read_meta()
        except RunFileError as exc:
            raise CompareRefused(f"{run.path}: eval/{eval_name}: {exc}") from exc
    prints = (meta.extra or {}).get(STRIP_PRINTS)
    if not isinstance(prints, dict) or not prints:
        raise CompareRefused(
            f"{run.path}: eval/{eval_name} has no strip fingerprints (written by an older "
            "attnlab): run attnlab eval on it again to compare it strip by strip"
        )
    by = str((meta.extra or {}).get(STRIPS_BY) or "pixels")  # synthetic, or an older attnlab
    return {str(k): str(v) for k, v in prints.items()}, by


def check_same_strips(
    a: RunInfo, b: RunInfo, eval_name: str, ra: pd.DataFrame, rb: pd.DataFrame
) -> list[int]:
    """The lengths both evaluations read, after checking they read the very same strips
    there; raises CompareRefused, naming the first length that differs."""
    (fa, by_a), (fb, by_b) = _fingerprints(a, eval_name), _fingerprints(b, eval_name)
    if by_a != by_b:
        older = b.path if by_a == "content" else a.path  # of an attnlab before content prints
        raise CompareRefused(
            f"{older}: eval/{eval_name} prints its strips by pixels, the other run's by "
            "content: run attnlab eval on it again to compare them strip by strip"
        )
    common = sorted(set(fa) & set(fb), key=int)
    if not common:
        raise CompareRefused(f"{a.path} and {b.path}: eval/{eval_name} share no length")
    for length in common:
        if fa[length] != fb[length]:
            raise CompareRefused(
                f"{a.path} and {b.path}: eval/{eval_name} did not read the same strips at "
                f"length {length} (strip fingerprints differ: another data.eval_seed, "
                "generator config or folder); refusing to pair them"
            )
    lengths = [int(n) for n in common]
    sa, sb = ra[ra["length"].isin(lengths)], rb[rb["length"].isin(lengths)]
    same_ids = set(sa.index) == set(sb.index) and len(sa) == len(sb)
    if not same_ids or not (sa["truth"] == sb.loc[sa.index, "truth"]).all():
        raise CompareRefused(
            f"{a.path} and {b.path}: eval/{eval_name}: the readings do not name the same "
            "strips with the same truths; refusing to pair them"
        )
    return lengths


def _pairs(a: Side, b: Side) -> tuple[list[tuple[RunInfo, RunInfo]], str]:
    by_a = {r.seed: r for r in a.runs}
    by_b = {r.seed: r for r in b.runs}
    common = sorted((s for s in by_a if s in by_b), key=lambda s: (s is None, s))
    if common:
        return [(by_a[s], by_b[s]) for s in common], "by seed " + ",".join(map(str, common))
    sa = sorted(a.runs, key=lambda r: (r.seed is None, r.seed))
    sb = sorted(b.runs, key=lambda r: (r.seed is None, r.seed))
    n = min(len(sa), len(sb))
    text = ", ".join(f"{x.seed}/{y.seed}" for x, y in zip(sa[:n], sb[:n], strict=True))
    return list(zip(sa[:n], sb[:n], strict=True)), f"in seed order (A/B: {text})"


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: 2 P(X <= min(b, c)), X ~ Binomial(b + c, 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    logs = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
        for i in range(k + 1)
    ]
    top = max(logs)
    tail = math.exp(top) * sum(math.exp(x - top) for x in logs)
    return min(1.0, 2.0 * tail)


def _cell(
    ca: np.ndarray,
    cb: np.ndarray,
    ea: np.ndarray,
    eb: np.ndarray,
    chars: np.ndarray,
    strata: np.ndarray,
    rng: np.random.Generator,
    n_boot: int,
) -> dict[str, float]:
    """Paired statistics of one cell. ca/cb (K, N) exact 0/1, ea/eb (K, N) edits, chars (N,),
    strata (N,) the length of each strip (resampled within its length)."""
    k, n = ca.shape
    d_exact = ca - cb  # (K, N)
    d_edits = ea - eb  # (K, N)
    out = {
        "exact_a": float(ca.mean()),
        "exact_b": float(cb.mean()),
        "exact_diff": float(d_exact.mean()),
        "cer_a": float((ea.sum(axis=1) / chars.sum()).mean()),
        "cer_b": float((eb.sum(axis=1) / chars.sum()).mean()),
    }
    out["cer_diff"] = out["cer_a"] - out["cer_b"]
    if n_boot > 0:
        w = np.zeros((n_boot, n))  # (R, N) multinomial strip counts, within each length
        for s in np.unique(strata):
            idx = np.flatnonzero(strata == s)
            w[:, idx] = rng.multinomial(len(idx), np.full(len(idx), 1 / len(idx)), size=n_boot)
        u = rng.multinomial(k, np.full(k, 1 / k), size=n_boot) / k  # (R, K) seed weights
        exact = ((w @ d_exact.T) / n * u).sum(axis=1)  # (R,)
        cer = ((w @ d_edits.T) / (w @ chars)[:, None] * u).sum(axis=1)
        out["exact_diff_lo"], out["exact_diff_hi"] = np.percentile(exact, [2.5, 97.5]).tolist()
        out["cer_diff_lo"], out["cer_diff_hi"] = np.percentile(cer, [2.5, 97.5]).tolist()
    else:
        out.update(exact_diff_lo=math.nan, exact_diff_hi=math.nan)
        out.update(cer_diff_lo=math.nan, cer_diff_hi=math.nan)
    b = int(((ca == 1) & (cb == 0)).sum())
    c = int(((ca == 0) & (cb == 1)).sum())
    out.update(mcnemar_b=b, mcnemar_c=c, mcnemar_p=mcnemar_p(b, c))
    return out


def compare(
    train: str, eval_name: str, seen: list[int], a: Side, b: Side, n_boot: int = N_BOOT
) -> pd.DataFrame:
    """comparisons.csv rows of A - B: per length, then the seen and unseen totals."""
    pairs, pairing = _pairs(a, b)
    if not pairs:
        raise CompareRefused(f"{a.variant} and {b.variant}: no runs to pair in eval/{eval_name}")
    lengths: list[int] | None = None
    frames = []
    for ra_run, rb_run in pairs:
        ra, rb = readings(ra_run, eval_name), readings(rb_run, eval_name)
        common = check_same_strips(ra_run, rb_run, eval_name, ra, rb)
        lengths = common if lengths is None else [n for n in lengths if n in common]
        frames.append((ra, rb))
    first = pairs[0][0]
    for (ra_run, _), (ra, _) in zip(pairs[1:], frames[1:], strict=True):
        # every seed pair read the same strips as the first one
        common = check_same_strips(first, ra_run, eval_name, frames[0][0], ra)
        lengths = [n for n in lengths if n in common]
    order = frames[0][0]
    order = order[order["length"].isin(lengths)].sort_values("length", kind="stable").index
    stack = {
        key: np.stack([f[side].loc[order, col].to_numpy(dtype=float) for f in frames])
        for key, side, col in (
            ("ca", 0, "correct"),
            ("cb", 1, "correct"),
            ("ea", 0, "edits"),
            ("eb", 1, "edits"),
        )
    }  # each (K, N)
    chars = frames[0][0].loc[order, "chars"].to_numpy(dtype=float)
    strata = frames[0][0].loc[order, "length"].to_numpy(dtype=int)
    rng = np.random.default_rng(BOOT_SEED)
    seen_set = set(seen)
    cells = [(int(n), "seen" if n in seen_set else "unseen", strata == n) for n in lengths]
    for split in ("seen", "unseen"):
        mask = np.isin(strata, [n for n in lengths if (n in seen_set) == (split == "seen")])
        if mask.any():
            cells.append((TOTAL, split, mask))
    rows = []
    for length, split, mask in cells:
        stats = _cell(
            stack["ca"][:, mask],
            stack["cb"][:, mask],
            stack["ea"][:, mask],
            stack["eb"][:, mask],
            chars[mask],
            strata[mask],
            rng,
            n_boot,
        )
        rows.append(
            {
                "train": train,
                "eval": eval_name,
                "a": a.variant,
                "b": b.variant,
                "length": length,
                "split": split,
                "n_pairs": len(pairs),
                "n_strips": int(mask.sum()),
                "pairing": pairing,
                **stats,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def sides(group_runs: list[RunInfo], eval_name: str) -> dict[str, Side]:
    """The variants of one training range that have `eval_name`, with their runs."""
    out: dict[str, Side] = {}
    for run in group_runs:
        if eval_name in run.evals:
            label = run.variant or run.reader_name
            out.setdefault(label, Side(label, [])).runs.append(run)
    return out


MAX_WITHIN = 6  # a reader with more variants (a sweeper's study) is compared only on request


def _swept(side: Side) -> dict[str, str]:
    return side.runs[0].swept


def _cross_pairs(variants: dict[str, Side], reference: str) -> list[tuple[str, str]]:
    """The reference reader's variant against every variant of another reader, matched on
    the swept keys when the reference has several."""
    base = [v for v, s in variants.items() if s.runs[0].reader_name == reference]
    pairs = []
    for label, side in variants.items():
        if side.runs[0].reader_name == reference or not base:
            continue
        swept = _swept(side)
        match = [v for v in base if _swept(variants[v]) == swept]
        if len(base) == 1:
            match = base
        if len(match) == 1:
            pairs.append((match[0], label))
    return pairs


def _within_pairs(labels: list[str], variants: dict[str, Side]) -> list[tuple[str, str]]:
    """Variants of one reader, in order: each against the one before it that differs from
    it in exactly one swept key (16 -> 64 -> 256 of a width: A the later, B the earlier)."""
    pairs = []
    for i, a in enumerate(labels):
        sa = _swept(variants[a])
        for b in reversed(labels[:i]):
            sb = _swept(variants[b])
            if sum(sa.get(k) != sb.get(k) for k in {*sa, *sb}) == 1:
                pairs.append((a, b))
                break
    return pairs


def default_pairs(
    variants: dict[str, Side], baseline: str | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(A, B) pairs the report compares unasked, and why nothing is paired when nothing is.

    Across readers: the baseline reader (the first reader present, in registry order, when
    the baseline is not in the report) against every variant of another reader. Within a
    reader with 2 to `MAX_WITHIN` variants: each variant against its neighbour in one
    swept key."""
    readers = ordered(s.runs[0].reader_name for s in variants.values())
    if not readers:
        return [], []
    reference = baseline if baseline in readers else readers[0]
    pairs = _cross_pairs(variants, reference)
    notes = []
    for reader in readers:
        mine = ordered_variants(v for v, s in variants.items() if s.runs[0].reader_name == reader)
        if len(mine) > MAX_WITHIN:
            notes.append(
                f"{reader} has {len(mine)} variants, too many to pair each unasked: "
                "name two with attnlab report --compare A B"
            )
        elif len(mine) > 1:
            pairs += _within_pairs(mine, variants)
    if not pairs and not notes:
        only = next(iter(variants))
        notes.append(
            f"only {only} was evaluated here: nothing to pair it with (paired differences "
            "need two readers, or two variants of one reader, read on the same strips)"
            if len(variants) == 1
            else f"no two of {'; '.join(variants)} differ in one thing only: name two "
            "with attnlab report --compare A B"
        )
    return pairs, notes
