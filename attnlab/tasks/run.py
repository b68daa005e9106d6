"""Running a Hydra task from the command line (``attnlab.cli``'s commands): its argv, its
stderr, and what failed, said in one line with exit status 2 (``errors.exit_with``): a
UserError as it is, a config error with its chain of causes and key, a value no check
caught with the attnlab file and line it came from, a study that ended without a result.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from attnlab.errors import UserError, exit_with, one_line

RUNNERS = ("cli/", "tasks/run.py")  # frames that run a task, not where its error arose
PACKAGE = Path(__file__).parents[1]  # attnlab/
SCHEMA_SUFFIX = "_schema"  # a reader's typed config in the ConfigStore (registry.register)


def _fail(message: str) -> NoReturn:
    exit_with(UserError(message))


def _one_line(err: BaseException) -> str:
    """Hydra and OmegaConf errors as one line: each message of the chain of causes, then the
    key it concerns (``errors.one_line``), each said once."""
    parts = [one_line(err)]
    seen = {parts[0].split(" (key: ")[0]}
    cause = err.__cause__ or err.__context__
    while cause is not None:
        text = str(cause).strip()
        if text and "$VALUE" not in text:  # OmegaConf's unfilled message template
            line = one_line(cause)
            if line.split(" (key: ")[0] not in seen:
                parts.append(line)
                seen.add(line.split(" (key: ")[0])
        cause = cause.__cause__
    return ": ".join(parts)


class _Once(logging.Filter):
    """Let the first record holding ``text`` through, drop the later ones."""

    def __init__(self, text: str):
        super().__init__()
        self.text, self.seen = text, False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.text not in record.getMessage():
            return True
        shown, self.seen = not self.seen, True
        return shown


def _say_once(logger: logging.Logger, text: str) -> None:
    """Without SLURM accounting, submitit warns at every poll; once says it."""
    if not any(isinstance(f, _Once) and f.text == text for f in logger.filters):
        logger.addFilter(_Once(text))


def _choice_of(args: list[str], group: str = "hydra/launcher") -> str | None:
    for a in args:
        if a.startswith(f"{group}="):
            return a.split("=", 1)[1]
    return None


def run_task(
    task: Callable[[], object], args: list[str], prog: str, multirun: bool = False
) -> None:
    """Run a Hydra task with ``args`` as its command line; user errors become exit 2."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from attnlab.tasks import outdirs

    launcher = _choice_of(args)
    wants_multirun = multirun or "-m" in args or "--multirun" in args
    if launcher not in (None, "basic") and not wants_multirun:
        _fail(
            f"hydra/launcher={launcher} only applies to multiruns: add -m (or use "
            f"'attnlab sweep lengths')"
        )
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises; this function reports
    _say_once(logging.getLogger("submitit"), "Bypassing sacct error")
    saved, saved_err = sys.argv, sys.stderr
    sys.argv = [prog, *args]  # a sweep's config sets hydra.mode=MULTIRUN itself
    if not wants_multirun and not prog.startswith("attnlab sweep"):
        sys.stderr = _WithoutHydraJobLine(saved_err)  # the line below says what failed
    logging.captureWarnings(True)  # library warnings go to the task's log, not stderr
    outdirs.forget()
    done = False
    try:
        task()
        done = True
    except UserError as err:
        _fail(str(err))
    except (HydraException, OmegaConfBaseException) as err:
        _fail(f"config: {_plain_line(err, prog)}")
    except Exception as err:
        from attnlab.tasks.sweepers import raised_in_sweeper

        if raised_in_sweeper(err):  # a study that ended without a result
            _fail(
                f"hydra/sweeper={_choice_of(args, 'hydra/sweeper')} stopped the study: "
                f"{_one_line(err)} (the 'Failed experiment' lines above say which trials "
                "failed, and why)"
            )
        if not isinstance(err, ValueError):
            raise
        if _raised_in_attnlab(err):  # a value no check caught: still one line, with where
            if os.environ.get("ATTNLAB_DEBUG"):
                raise
            _fail(f"{_one_line(err)} ({_where(err)}; ATTNLAB_DEBUG=1 shows the traceback)")
        # Hydra rejects some overrides with a bare ValueError that does not name them.
        _fail(f"config: {_one_line(err)} (overrides: {' '.join(args)})")
    finally:
        sys.argv, sys.stderr = saved, saved_err
        logging.captureWarnings(False)
        if not done:  # a refused (or failed) command leaves no empty directory it made
            outdirs.remove_created()


def _plain_line(err: BaseException, prog: str) -> str:
    """A composition error as one line; a missing choice or group said plainly, a reader's key
    that is not there with where the keys are listed."""
    line = _missing_choice(err, prog) or _one_line(err)
    if "(key: model." in line and " not in '" in line:
        from attnlab.models import registry

        found = re.search(r"Key '(\w+)' not in '(\w+)'", line)
        renamed = found and registry.new_name(found[2], found[1])
        if renamed:  # an older command's key
            return f"{line}; model.{found[1]} is called model.{renamed} now"
        line += "; attnlab readers lists each reader's own keys"
    return line


def _missing_choice(err: BaseException, prog: str) -> str | None:
    """A config group's choice that does not exist (``model=fixd``, ``hydra/launcher=foo``)
    as one line naming the group's valid choices; a group this command does not take
    (``preset=tiny`` on ``attnlab eval``) as one line saying so. None: another error."""
    from hydra.errors import MissingConfigException

    missing = next((e for e in _chain(err) if isinstance(e, MissingConfigException)), None)
    if missing is not None and missing.missing_cfg_file and missing.options:
        group, _, name = str(missing.missing_cfg_file).rpartition("/")
        choices = sorted(o for o in missing.options if not o.endswith(SCHEMA_SUFFIX))
        close = difflib.get_close_matches(name, choices, n=1)
        hint = f" (did you mean {group}={close[0]}?)" if close else ""
        return (
            f"{group}={name}: no config {group}/{name}; choose one of: {', '.join(choices)}{hint}"
        )
    text = str(err)
    if "No match in the defaults list" in text and "Could not override '" in text:
        key = text.split("Could not override '", 1)[1].split("'", 1)[0]
        return f"{key}: {prog} takes no {key} (not one of its config groups)"
    return None


def _chain(err: BaseException):
    while err is not None:
        yield err
        err = err.__cause__ or err.__context__


class _WithoutHydraJobLine:
    """stderr without Hydra's "Error executing job with overrides: [...]" line, which it
    writes before re-raising a task's error; ``run_task`` then says what failed in one."""

    PREFIX = "Error executing job with overrides:"

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return len(text) if text.startswith(self.PREFIX) else self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _where(err: BaseException) -> str:
    """The innermost attnlab frame of a traceback, as ``module.py:line``."""
    import traceback

    here = PACKAGE
    frames = [f for f in traceback.extract_tb(err.__traceback__) if _inside(f.filename, here)]
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "attnlab"


def _inside(filename: str, here: Path) -> bool:
    path = Path(filename)
    return path.is_relative_to(here) and not path.relative_to(here).as_posix().startswith(RUNNERS)


def _raised_in_attnlab(err: BaseException) -> bool:
    """Whether an exception comes from inside a task (a bug) rather than from composition."""
    import traceback

    here = PACKAGE
    return any(_inside(frame.filename, here) for frame in traceback.extract_tb(err.__traceback__))
