"""Whether two evaluations read the same strips, from their files: a pairing's refusal.

Every fixed evaluation set is drawn from ``data.eval_seed``, so two runs evaluated on it read
the same strips, and ``report.compare`` measures their difference strip by strip. A pairing of
evaluations that did not read the same strips is refused (`CompareRefused`): their
``eval.json`` strip fingerprints must be equal at every length compared, and their readings
(``readings.csv``, read here whole and checked cell by cell) must name the same strips with
the same truths. Labelled strips print by content and label (``dedup.content_key``), so one
folder read at two heights pairs.
"""

from __future__ import annotations

import pandas as pd

from attnlab.report.run_info import RunInfo
from attnlab.runs.evaldir import STRIP_PRINTS, STRIPS_BY
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.rundir import RunDir


class CompareRefused(Exception):
    """Two evaluations that cannot be paired, with the reason in one line."""


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
