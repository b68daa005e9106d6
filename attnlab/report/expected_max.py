"""Expected best validation score against the number of tuning trials, from a study's scores.

Given the N scores of N trials of one reader (any order), the expected best of n trials drawn
from them, for n = 1..N:

- ``unbiased`` (Tang et al. 2020, sampling without replacement, castorini/meanmax): with the
  scores sorted v(1) <= ... <= v(N), E[max of n] = sum_{j=n..N} C(j-1, n-1) / C(N, n) v(j),
  which is exactly the mean of the best score over every n-subset of the N trials;
- ``dodge`` (Dodge et al. 2019, "Show your work", sampling with replacement):
  E[max of n] = sum_i v(i) ((i/N)^n - ((i-1)/N)^n), biased towards the top for n near N.

A minimised objective (``val_cer``) is handled by negating the scores: the expected best is
then the expected minimum. The band is a percentile bootstrap over the trials (each resample
draws N scores with replacement from the N, seeded), computed for each estimator. Pure
functions of a list of numbers: no file, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from math import comb

import numpy as np
import pandas as pd

ESTIMATORS = ("unbiased", "dodge")
COLUMNS = ["variant", "n", "estimator", "expected", "lo", "hi"]
N_BOOT = 1000
BOOT_SEED = 0


def unbiased(scores: Sequence[float]) -> list[float]:
    """E[max of n], n = 1..N, sampling n of the N trials without replacement (Tang et al.)."""
    v = sorted(float(s) for s in scores)
    big_n = len(v)
    return [
        sum(comb(j - 1, n - 1) * v[j - 1] for j in range(n, big_n + 1)) / comb(big_n, n)
        for n in range(1, big_n + 1)
    ]


def dodge(scores: Sequence[float]) -> list[float]:
    """E[max of n], n = 1..N, sampling n of the N trials with replacement (Dodge et al.)."""
    v = np.sort(np.asarray(scores, dtype=float))
    big_n = len(v)
    i = np.arange(1, big_n + 1)
    return [
        float(np.sum(v * ((i / big_n) ** n - ((i - 1) / big_n) ** n))) for n in range(1, big_n + 1)
    ]


BY_NAME: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "unbiased": unbiased,
    "dodge": dodge,
}


def expected_best(scores: Sequence[float], estimator: str, maximize: bool = True) -> list[float]:
    """The expected best of n trials, n = 1..N, in the objective's direction."""
    if len(scores) == 0:
        return []
    fn = BY_NAME[estimator]
    if maximize:
        return fn(scores)
    return [-x for x in fn([-float(s) for s in scores])]


def band(
    scores: Sequence[float],
    estimator: str,
    maximize: bool = True,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
) -> tuple[list[float], list[float]]:
    """A 95% percentile bootstrap band (lo, hi) of each n's expected best: the N trials
    resampled with replacement ``n_boot`` times by a generator seeded with ``seed``."""
    values = np.asarray(scores, dtype=float)
    big_n = len(values)
    if big_n == 0 or n_boot <= 0:
        return [float("nan")] * big_n, [float("nan")] * big_n
    rng = np.random.default_rng(seed)
    draws = np.array(
        [
            expected_best(values[rng.integers(0, big_n, big_n)], estimator, maximize)
            for _ in range(n_boot)
        ]
    )  # (R, N)
    lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
    return lo.tolist(), hi.tolist()


def expected_max_frame(
    scores: Mapping[str, Sequence[float]],
    maximize: bool = True,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
) -> pd.DataFrame:
    """expected_max.csv rows: per variant, estimator and n = 1..N, the expected best and
    its band (each variant's bootstrap from the same seed)."""
    rows = []
    for variant, values in scores.items():
        for estimator in ESTIMATORS:
            expected = expected_best(values, estimator, maximize)
            lo, hi = band(values, estimator, maximize, n_boot, seed)
            for n, (e, a, b) in enumerate(zip(expected, lo, hi, strict=True), start=1):
                rows.append([variant, n, estimator, e, a, b])
    return pd.DataFrame(rows, columns=COLUMNS)


def _leads(
    frame: pd.DataFrame, a: str, b: str, maximize: bool
) -> list[tuple[int, str, bool | None]]:
    """Per n that both unbiased curves have: (n, who is ahead: a, b or "" when the
    estimates are equal, whether the lead is clear: each estimate outside the other's 95%
    band; None without bands)."""
    curves = frame[frame["estimator"] == "unbiased"]
    ca = curves[curves["variant"] == a].set_index("n")
    cb = curves[curves["variant"] == b].set_index("n")
    sign = 1.0 if maximize else -1.0
    out: list[tuple[int, str, bool | None]] = []
    for n in sorted(set(ca.index) & set(cb.index)):
        ea, eb = float(ca.loc[n, "expected"]), float(cb.loc[n, "expected"])
        if math.isclose(ea, eb, rel_tol=1e-9, abs_tol=1e-12):
            out.append((int(n), "", None))
            continue
        first = a if sign * (ea - eb) > 0 else b
        lead, trail = (ca, cb) if first == a else (cb, ca)
        e_lead, e_trail = float(lead.loc[n, "expected"]), float(trail.loc[n, "expected"])
        lo_l, hi_l, lo_t, hi_t = (float(x.loc[n, k]) for x in (lead, trail) for k in ("lo", "hi"))
        if any(math.isnan(x) for x in (lo_l, hi_l, lo_t, hi_t)):
            out.append((int(n), first, None))
            continue
        inside = lo_t <= e_lead <= hi_t or lo_l <= e_trail <= hi_l
        out.append((int(n), first, not inside))
    return out


def _span(ns: list[int]) -> str:
    return f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]}..{ns[-1]}"


def _runs(leads: list[tuple[int, str, bool | None]], same) -> list[tuple[list[int], tuple]]:
    """Consecutive n whose ``same(lead)`` is equal: (their n, that value)."""
    out: list[tuple[list[int], tuple]] = []
    for lead in leads:
        key = same(lead)
        if out and out[-1][1] == key:
            out[-1][0].append(lead[0])
        else:
            out.append(([lead[0]], key))
    return out


BAND = {True: "clear of the 95% bands", False: "level within the 95% bands"}


def _segments(leads: list[tuple[int, str, bool | None]], way: str) -> list[str]:
    """What holds at each n, consecutive n said together: 'a is higher at n = 1..2, level
    within the 95% bands', 'equal at n = 3', 'b is higher at n = 4, clear of the bands'."""
    out = []
    for ns, (who, clear) in _runs(leads, lambda lead: lead[1:]):
        if not who:
            out.append(f"equal at {_span(ns)}")
        else:
            out.append(
                f"{who} is {way} at {_span(ns)}" + (f", {BAND[clear]}" if clear is not None else "")
            )
    return out


def crossing_line(frame: pd.DataFrame, a: str, b: str, maximize: bool = True) -> str:
    """Whether and where the unbiased curves of variants ``a`` and ``b`` cross, in one line,
    with what holds at each n both curves have: who is ahead (clear of the bootstrap bands,
    or level within them), where the estimates are equal, where the lead changes. A verdict
    is never taken from the last n alone."""
    leads = _leads(frame, a, b, maximize)
    if not leads:
        return f"{a} and {b}: no n that both studies reach"
    ns = [n for n, _, _ in leads]
    way = "higher" if maximize else "lower"
    head = f"the expected-best curves of {a} and {b}"
    ahead = [(n, who) for n, who, _ in leads if who]
    changes = [(x, y) for (x, p), (y, q) in zip(ahead, ahead[1:], strict=False) if p != q]
    if not ahead:
        return f"{head} are equal at every n = {ns[0]}..{ns[-1]}"
    if not changes and len(ahead) == len(leads):
        runs = _runs(leads, lambda lead: (lead[2],))
        bands = [f"{BAND[c]} at {_span(n)}" for n, (c,) in runs if c is not None]
        return (
            f"{head} do not cross at {_span(ns)}: {ahead[0][1]} is {way} (better) at every "
            "budget" + "".join(f", {b}" for b in bands)
        )
    said = "; ".join(_segments(leads, way))
    if not changes:
        return f"{head} do not cross at {_span(ns)}: {said}"
    where = ", ".join(f"between n = {x} and n = {y}" for x, y in changes)
    return (
        f"{head} cross {where}: {said}; {ahead[0][1]} is better with few trials, "
        f"{ahead[-1][1]} with {ahead[-1][0]}; which reader wins depends on the tuning budget"
    )
