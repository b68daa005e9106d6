"""``data.limit=N``: train on N strips of a folder's training pool, nested across N.

The training pool (the distinct strips of the seen lengths that are not held out:
``attnlab.data.source_train``) is put in one fixed order drawn from the run's ``seed``:
each length's strips shuffled, then taken one length at a time in turn (1, 2, ..., 8, 1,
2, ...), a length that has run out dropping out of the turns. A run trains on the first N
of that order, so

- draws are nested: the first 100 strips are the first 100 of the first 300, and so on;
- every length gets N / (lengths) strips while every length has that many (the log says
  which lengths ran short, and the others fill in);
- the held-out share, drawn before from ``data.eval_seed`` over the whole source, does not
  depend on N: every N is tested on the same strips (``data_split.json`` lists them).

Why the run's seed (not ``data.eval_seed``): the seeds of one variant then train on
different draws, so a curve's seed band covers which strips happened to be labelled as well
as the initialisation, while two variants run with the same seed (scratch and fine-tuned)
train on the very same strips. N over the pool is refused (a point of the curve named N
must have trained on N strips), in one line naming the pool's size.
"""

from __future__ import annotations

import logging
from collections import Counter

import torch

from attnlab.data.strips import set_seed
from attnlab.errors import UserError

log = logging.getLogger("attnlab.train")


def limit_order(labels: list[str], seed: int) -> list[int]:
    """Positions 0..len(labels)-1 in the fixed order of the draw: each length shuffled
    (from ``seed``), then the lengths taken in turn, shortest first."""
    by_length: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        by_length.setdefault(len(label), []).append(i)
    gen = torch.Generator().manual_seed(set_seed(seed, "limit", 0))
    queues = []
    for n in sorted(by_length):
        members = by_length[n]
        queues.append([members[j] for j in torch.randperm(len(members), generator=gen).tolist()])
    order: list[int] = []
    for depth in range(max(map(len, queues), default=0)):
        order.extend(q[depth] for q in queues if depth < len(q))
    return order


def draw(pool: list[int], labels: list[str], limit: int | None, seed: int, where: str):
    """The entries of ``pool`` (``labels`` its labels, in order) a run with ``data.limit``
    trains on, in the draw's order; all of ``pool`` when ``limit`` is None."""
    if limit is None:
        return list(pool)
    limit = int(limit)
    if limit > len(pool):
        raise UserError(
            f"data.limit={limit}: {where} has {len(pool)} training strips of the seen lengths "
            f"(after the held-out share); use data.limit<={len(pool)} or data.limit=null for all"
        )
    order = limit_order(labels, seed)[:limit]
    if limit == len(pool):  # the whole pool: no length is short of a share of it
        log.info("data.limit=%d: the whole training pool of %s", limit, where)
    else:
        _log_balance(limit, [labels[i] for i in order], Counter(len(s) for s in labels))
    return [pool[i] for i in order]


def _log_balance(limit: int, drawn: list[str], available: Counter) -> None:
    """One line: the strips drawn per length, and the lengths that ran short, if any."""
    got = Counter(len(s) for s in drawn)
    per = ", ".join(f"{n}: {got[n]}" for n in sorted(available))
    fair = limit // max(1, len(available))
    short = sorted(n for n in available if available[n] < fair)
    if short:
        have = ", ".join(f"{n} ({available[n]})" for n in short)
        log.warning(
            "data.limit=%d: not balanced by length: lengths %s have fewer training strips "
            "than an equal share (%d), the other lengths fill in; drawn per length %s",
            limit,
            have,
            fair,
            per,
        )
    else:
        log.info("data.limit=%d: training strips drawn per length %s", limit, per)
