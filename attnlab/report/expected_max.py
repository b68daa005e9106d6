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
    return [float(np.sum(v * ((i / big_n) ** n - ((i - 1) / big_n) ** n)))
            for n in range(1, big_n + 1)]  # fmt: skip


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
        [expected_best(values[rng.integers(0, big_n, big_n)], estimator, maximize)
         for _ in range(n_boot)]
    )  # fmt: skip  # (R, N)
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


def crossing_line(frame: pd.DataFrame, a: str, b: str, maximize: bool = True) -> str:
    """Whether and where the unbiased curves of variants ``a`` and ``b`` cross, in one line:
    the first n at which the better of the two changes, over the n both curves have."""
    curves = frame[frame["estimator"] == "unbiased"]
    ea = curves[curves["variant"] == a].set_index("n")["expected"]
    eb = curves[curves["variant"] == b].set_index("n")["expected"]
    ns = sorted(set(ea.index) & set(eb.index))
    if not ns:
        return f"{a} and {b}: no n that both studies reach"
    sign = 1.0 if maximize else -1.0
    lead = [np.sign(sign * (ea[n] - eb[n])) for n in ns]
    way = "higher" if maximize else "lower"
    changes = [
        (ns[k - 1], ns[k]) for k in range(1, len(ns)) if lead[k] != lead[k - 1] and lead[k] != 0
    ]
    if not changes:
        ahead = a if lead[-1] > 0 else b if lead[-1] < 0 else None
        if ahead is None:
            return f"the expected-best curves of {a} and {b} are equal at n = {ns[0]}..{ns[-1]}"
        return (
            f"the expected-best curves of {a} and {b} do not cross at n = {ns[0]}..{ns[-1]}: "
            f"{ahead} is {way} (better) at every budget"
        )
    where = ", ".join(f"between n = {x} and n = {y}" for x, y in changes)
    first, last = lead[0], lead[-1]
    name = {1.0: a, -1.0: b, 0.0: "neither"}
    return (
        f"the expected-best curves of {a} and {b} cross {where}: {name[float(first)]} is "
        f"better with few trials, {name[float(last)]} with {ns[-1]}; which reader wins depends "
        "on the tuning budget"
    )
