"""``UserError``, the base of every exception for a mistake a user can fix (a bad option, a
missing or unreadable file, an incompatible checkpoint, a run directory in use), and how a
Hydra task reports it: one line on stderr and exit status 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn


class UserError(Exception):
    """Bad input: a wrong option, a missing or unreadable file, an incompatible checkpoint."""


def exit_with(err: UserError) -> NoReturn:
    """End the program as the CLI does for a user error: one line on stderr, exit status 2."""
    print(f"attnlab: error: {err}", file=sys.stderr)
    raise SystemExit(2) from err


def reports_user_errors(task: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A Hydra task whose UserError ends the program with one line and exit status 2.

    Under a multirun the error is raised instead, so the launcher records the job as failed
    and the other jobs go on.
    """

    @functools.wraps(task)
    def wrapper(cfg: Any) -> Any:
        try:
            return task(cfg)
        except UserError as err:
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            if HydraConfig.get().mode == RunMode.MULTIRUN:
                raise
            exit_with(err)

    return wrapper


def one_line(err: BaseException) -> str:
    """An error as one line: its first line, then the key it concerns (OmegaConf's messages go
    on with ``full_key:`` lines)."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    key = next(
        (ln.split(":", 1)[1].strip() for ln in lines if ln.strip().startswith("full_key:")), ""
    )
    return lines[0] + (f" (key: {key})" if key else "")


def with_article(word: str) -> str:
    """``word`` with its indefinite article: "an attention", "a fixed", "an int"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
