"""The rules every config check is written with: a value a type cannot rule out is refused in
one UserError line naming its key, the value and the rule (``key=value: rule``)."""

from __future__ import annotations

import math
import re
from typing import Any

from attnlab.errors import UserError

# What the README documents: auto (CUDA when present), cpu, cuda, cuda:N.
DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
SEED_LIMIT = 2**63  # torch.manual_seed takes a signed 64-bit integer


def finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def require(ok: bool, key: str, value: Any, rule: str) -> None:
    if not ok:
        raise UserError(f"{key}={value!r}: {rule}")


def check_pairs(section: Any, prefix: str, keys: list[str], low: float = 0.0) -> None:
    """``[low, high]`` ranges of floats, each finite, ``low`` or above and in order."""
    for key in keys:
        pair = list(getattr(section, key))
        ok = len(pair) == 2 and all(finite(v) for v in pair) and low <= pair[0] <= pair[1]
        require(ok, f"{prefix}.{key}", pair, f"must be [low, high] with {low:g} <= low <= high")


def check_at_least(section: Any, prefix: str, keys: tuple[str, ...], low: int = 1) -> None:
    for key in keys:
        value = getattr(section, key)
        require(value >= low, f"{prefix}.{key}", value, f"must be >= {low}")


def span(pair: Any, key: str) -> tuple[int, int]:
    """A ``[low, high]`` length range, checked."""
    values = list(pair) if pair is not None else []
    if len(values) != 2 or not 1 <= int(values[0]) <= int(values[1]):
        raise UserError(f"{key} must be [low, high] with 1 <= low <= high, got {values}")
    return int(values[0]), int(values[1])


def check_device(value: Any, key: str) -> None:
    ok = isinstance(value, str) and bool(DEVICE.match(value))
    require(ok, key, value, "must be auto, cpu, cuda or cuda:N")


def check_seed(value: Any, key: str = "seed") -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SEED_LIMIT
    require(ok, key, value, f"must be an integer in [0, 2**63) (0 to {SEED_LIMIT - 1})")


# The widest beam: far beyond what a digit vocabulary gains from (the readings stop
# changing by a width of 10), below widths whose rows exhaust memory (1e9: std::bad_alloc).
MAX_BEAM = 64


def check_beam(beam: Any, key: str) -> None:
    """The beam width of eval and of read: one rule for both."""
    ok = isinstance(beam, int) and not isinstance(beam, bool) and 1 <= beam <= MAX_BEAM
    require(ok, key, beam, f"must be >= 1 (1 = greedy) and at most {MAX_BEAM}")


def check_name(value: Any, key: str) -> None:
    """An output folder's own name (eval.name, probe.name)."""
    name = str(value)
    ok = bool(name) and "/" not in name and not name.startswith(".")
    require(ok, key, name, "must be a plain folder name (no '/', not hidden)")
