"""The parameter-matched control (``cost.match``, ``cost.match_key``): the value of one
integer key of a reader's config (a width: more is more parameters) that brings the reader
closest to another reader's parameter count, e.g. the fixed-context reader widened to the
attention reader's size.

Only values the reader's own config check accepts are tried (the transformer's
``model.heads`` must divide ``model.dec_hidden``), so the printed override can be trained.
A key that is not the reader's, not an integer, or does not change its parameter count is
refused in one line before any search; so is a search that no value up to ``MAX_VALUE``
ends. Counted on PyTorch's meta device (shapes, no memory), by bisection.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnlab.errors import UserError

MAX_VALUE = 1 << 20  # no width searched beyond this
SCAN = 256  # values tried past one the reader's check refuses, for the next it accepts
_ABSENT = object()


class Widths:
    """The parameter count of ``cfg``'s reader with ``key`` set to each value tried (None
    where the reader's config check refuses the value), cached."""

    def __init__(self, cfg: DictConfig, key: str):
        self.cfg, self.key, self.name = cfg, key, str(cfg.model.name)
        self.where = f"cost.match_key={key}"
        self.start = self._current()
        self.seen: dict[int, int | None] = {}

    def _current(self) -> int:
        if not self.key.startswith("model."):
            raise UserError(f"{self.where}: must be a key of the reader's config (model.KEY)")
        value = OmegaConf.select(self.cfg.model, self.key.removeprefix("model."), default=_ABSENT)
        if value is _ABSENT:
            raise UserError(
                f"{self.where}: the {self.name} reader has no such key "
                f"('attnlab readers {self.name}' lists its keys)"
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(
                f"{self.where}: is {value!r} in the {self.name} reader, not an integer width"
            )
        return value

    def params(self, n: int) -> int | None:
        if n not in self.seen:
            self.seen[n] = self._count(n)
        return self.seen[n]

    def _count(self, n: int) -> int | None:
        from attnlab.config.experiment import model_schema
        from attnlab.models import registry

        model = self.cfg.model.copy()
        OmegaConf.update(model, self.key.removeprefix("model."), n)
        try:
            model_schema(model).check(model, int(self.cfg.data.height))
        except UserError:
            return None  # a value the reader refuses: never offered
        try:
            return registry.check_size(model, self.cfg.data.height, self.cfg.data.charset)
        except UserError as err:  # too large counts as past any target; else not buildable
            return registry.MAX_PARAMS + 1 if "too large" in str(err) else None

    def up(self, n: int) -> tuple[int, int] | None:
        """The first value from ``n`` up that the reader accepts, and its count."""
        for m in range(max(1, n), min(max(1, n) + SCAN, MAX_VALUE + 1)):
            if (p := self.params(m)) is not None:
                return m, p
        return None

    def down(self, n: int) -> tuple[int, int] | None:
        """The first value from ``n`` down (to 1) that the reader accepts, and its count."""
        for m in range(n, max(0, n - SCAN), -1):
            if (p := self.params(m)) is not None:
                return m, p
        return None


def matched_width(cfg: DictConfig, target: int, key: str = "model.dec_hidden") -> tuple[int, int]:
    """The value of ``key`` (one the reader's check accepts) that brings the reader of
    ``cfg`` closest to ``target`` parameters, and its count."""
    w = Widths(cfg, key)
    check_changes(w)
    lo, hi = 1, 1
    while (got := w.up(hi)) is not None and got[1] < target:
        lo, hi = hi, hi * 2
        if hi > MAX_VALUE:
            got = None
            break
    if got is None:
        raise UserError(
            f"{w.where}: no value up to {MAX_VALUE:,} that the {w.name} reader accepts "
            f"brings it to {target:,} parameters"
        )
    while hi - lo > 1:  # the smallest value whose next accepted one reaches the target
        mid = (lo + hi) // 2
        step = w.up(mid)
        lo, hi = (mid, hi) if step is not None and step[1] < target else (lo, mid)
    found = [x for x in (w.down(hi - 1), w.up(hi)) if x is not None]
    return min(found, key=lambda x: (abs(x[1] - target), x[0]))


def check_changes(w: Widths) -> None:
    """Refuse a key that leaves the parameter count as it is (doubling it changes nothing)."""
    here = w.params(w.start) if w.start >= 1 else None
    here = (w.start, here) if here is not None else w.up(max(1, w.start))
    there = w.up(max(2, 2 * w.start))
    if here is None or there is None or here[1] == there[1]:
        shown = f" ({here[1]:,} at {here[0]} and at {there[0]})" if here and there else ""
        raise UserError(
            f"{w.where}: does not change the {w.name} reader's parameter count{shown}; "
            "name a width of the reader (e.g. model.dec_hidden)"
        )


def note(cfg: Any, key: str, target: int, match: str) -> str:
    """The control as the override that gives it, with its count against the target's."""
    n, got = matched_width(cfg, target, key)
    return (
        f"parameter-matched control: model={cfg.model.name} {key}={n} has {got:,} "
        f"parameters, {match} {target:,} ({100 * (got - target) / target:+.2f}%)"
    )
