"""``attnlab`` run inside the test process: what a subprocess would print and exit with,
without paying torch's and Hydra's import again (a few seconds per command on 2 cores).

For tests where the subprocess is not what is tested (help, config errors, a short
command's files and messages). Tests of signals, of the real entry point's exit codes, of
locks between processes or of fresh imports keep real subprocesses (conftest's
``attnlab_cli``). Around each command: the working directory, the environment a subprocess
gets (``cli_env``'s variables), Hydra's global state, the logging set-up, torch's thread
count and the signal handlers are as they were before it.

``run_in_one_process`` runs several commands one after the other in one fresh subprocess
(``run_cli`` inside it): for a sequence of commands that must not run in the test process
(a reader plugin registered only for them) but need no process each.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

PROG = "python -m attnlab.cli"  # the name the subprocess runs under, in usage lines
ENV = {"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT)


def run_cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``attnlab ARGS`` in ``cwd``, in this process: returncode, stdout and stderr as
    ``subprocess.run(..., capture_output=True, text=True)`` gives them."""
    from hydra.core.global_hydra import GlobalHydra

    from attnlab.cli import app

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        os.chdir(cwd)
        GlobalHydra.instance().clear()
        try:
            app(args=argv, prog_name=PROG, standalone_mode=True)
            code = 0
        except SystemExit as end:
            code = _exit_code(end.code)
        except BaseException:  # noqa: BLE001 - what an uncaught error would print
            traceback.print_exc()
            code = 1
        finally:
            GlobalHydra.instance().clear()
    return subprocess.CompletedProcess(
        [*PROG.split(), *argv], code, stdout=out.getvalue(), stderr=err.getvalue()
    )


_DRIVER = """
import json, sys
from pathlib import Path
from helpers.cli import run_cli
commands, cwd, out = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
done = []
for args in commands:
    res = run_cli(*args, cwd=cwd)
    done.append([res.returncode, res.stdout, res.stderr])
    out.write_text(json.dumps(done))
"""


def run_in_one_process(
    commands: list[list[object]], *, cwd: Path, env: dict[str, str], timeout: float = 600
) -> list[subprocess.CompletedProcess[str]]:
    """``attnlab ARGS`` for each ARGS of ``commands``, in order, in one fresh ``python``
    subprocess with ``env`` (tests/ added to its PYTHONPATH for this module): what
    ``run_cli`` returns for each, as if each had been its own process. The subprocess
    must end 0 (its commands' codes are theirs, in the results)."""
    tests = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), tests]))
    out = Path(cwd) / ".run_in_one_process.json"
    cmd = [sys.executable, "-c", _DRIVER, json.dumps([[str(a) for a in c] for c in commands])]
    proc = subprocess.run(
        [*cmd, str(cwd), str(out)],
        cwd=cwd,
        env={**env, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    done = json.loads(out.read_text())
    out.unlink()
    return [
        subprocess.CompletedProcess([*PROG.split(), *map(str, c)], code, stdout, stderr)
        for c, (code, stdout, stderr) in zip(commands, done, strict=True)
    ]


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


@contextlib.contextmanager
def _restored():
    """Put back what a command changes in its process."""
    cwd = os.getcwd()
    env = dict(os.environ)
    os.environ.update(ENV)
    os.environ.pop("HYDRA_FULL_ERROR", None)
    root = logging.getLogger()
    root_state = (root.level, list(root.handlers), list(root.filters))
    loggers = {
        name: (lg.level, list(lg.handlers), lg.propagate, lg.disabled)
        for name, lg in logging.Logger.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    disabled = logging.root.manager.disable
    handlers = {s: signal.getsignal(s) for s in SIGNALS}
    threads = _torch_threads()
    argv = list(sys.argv)
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv[:] = argv
        for s, h in handlers.items():
            signal.signal(s, h)
        logging.disable(disabled)
        for h in set(root.handlers) - set(root_state[1]):
            h.close()
        root.setLevel(root_state[0])
        root.handlers[:] = root_state[1]
        root.filters[:] = root_state[2]
        for name, lg in list(logging.Logger.manager.loggerDict.items()):
            if not isinstance(lg, logging.Logger):
                continue
            level, hs, propagate, off = loggers.get(name, (logging.NOTSET, [], True, False))
            for h in set(lg.handlers) - set(hs):
                h.close()
            lg.setLevel(level)
            lg.handlers[:] = hs
            lg.propagate, lg.disabled = propagate, off
        logging.captureWarnings(False)
        import torch

        torch.set_num_threads(threads)


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def bench_commands(section: str, cwd: Path):
    """A benchmark section's ``attnlab(*args)`` (``attnlab.bench.common.run_cli``'s contract)
    run by ``run_cli`` in this process, in ``cwd``: the same commands and files without a
    process (and its imports) each; a failure ends the section as the subprocess's does."""

    def attnlab(*args: object) -> None:
        res = run_cli(*args, cwd=cwd)
        if res.returncode != 0:
            raise SystemExit(f"{section}: attnlab {args[:3]}... failed:\n{res.stderr[-2000:]}")

    return attnlab
