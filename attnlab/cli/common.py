"""What every ``attnlab`` command shares: how a command forwards its words to Hydra (its
context settings and its usage line) and how it ends on a mistake a user can fix (one line on
stderr, exit status 2).
"""

from __future__ import annotations

from typing import NoReturn

from attnlab.errors import UserError, exit_with

FORWARD = {"allow_extra_args": True, "ignore_unknown_options": True}
OVERRIDES = "[OPTIONS] [KEY=VALUE]..."  # the usage line of a command that forwards to Hydra


def fail(message: str) -> NoReturn:
    exit_with(UserError(message))
