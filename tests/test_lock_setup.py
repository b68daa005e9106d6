"""The README's set-up works as written: `make install` (the lock installed into .venv), then
the activation line, then `attnlab ...`; and a folder named attnlab (a clone) beside a
script does not hide the package (`make install`'s .pth), or is named in one line by the
command line when it does (a `pip install -e .` environment: attnlab/shadowing.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from helpers.lock import ROOT

ACTIVATE = ". .venv/bin/activate"


def _two_commands() -> list[str]:
    """The commands of the README's "Two commands" section (its install block, then the two
    commands' block), in order, comments dropped."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert blocks, "README's Two commands has no bash block"
    lines = "".join(blocks).splitlines()
    return [line.split("#")[0].strip() for line in lines if line.strip()]


def _without_venv_path() -> dict[str, str]:
    """The environment of a new shell: no virtual environment active."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bins = (str(ROOT / ".venv" / "bin"), os.path.dirname(sys.executable))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p not in bins)
    return env


def test_the_readme_activates_the_environment_before_the_first_attnlab_command():
    lines = _two_commands()
    assert lines[0] == "make install" and ACTIVATE in lines
    assert sum(line.startswith("attnlab sweep") for line in lines) == 1, lines  # pasted whole
    first = next(i for i, line in enumerate(lines) if line.startswith("attnlab "))
    assert lines.index(ACTIVATE) < first, lines
    # `make demo` says it too, as its last line.
    outer = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")  # under `make test`: no make[1] lines
    env = {k: v for k, v in os.environ.items() if k not in outer}
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo"], cwd=ROOT, env=env,
        capture_output=True, text=True,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    said = subprocess.run(["bash", "-c", dry.stdout.strip().splitlines()[-1]],
                          capture_output=True, text=True)  # fmt: skip
    assert said.stdout.strip().endswith(ACTIVATE), said.stdout
    # As written, in a new shell in the clone: `attnlab` is then this environment's.
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        pytest.skip("no .venv in the clone (the suite runs from another environment)")
    shell = subprocess.run(
        ["bash", "-c", f"command -v attnlab; {ACTIVATE} && command -v attnlab"],
        cwd=ROOT, env=_without_venv_path(), capture_output=True, text=True,
    )  # fmt: skip
    assert shell.stdout.strip().splitlines()[-1] == str(ROOT / ".venv" / "bin" / "attnlab")


def _clone_beside(tmp_path):
    """A folder holding a clone named attnlab (no __init__.py at its top), as a user's."""
    clone = tmp_path / "attnlab"
    (clone / "attnlab").mkdir(parents=True)
    (clone / "README.md").write_text("# attnlab\n")
    (clone / "attnlab" / "__init__.py").write_text("")
    return tmp_path


def test_a_clone_named_attnlab_beside_a_script_does_not_hide_the_package(tmp_path):
    """`make install` (a .pth with the clone's root) lets the package win over the folder."""
    script = "import attnlab; print(attnlab.__file__); print(attnlab.__all__)"
    res = subprocess.run([sys.executable, "-c", script], cwd=_clone_beside(tmp_path),
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == str(ROOT / "attnlab" / "__init__.py")
    assert "load" in res.stdout.splitlines()[1]  # the package itself, not an empty folder


def test_the_command_line_names_a_folder_that_hides_the_package(tmp_path):
    """Without the .pth (``pip install -e .``: only setuptools' import hook) the folder wins
    for ``import attnlab``; ``python -m attnlab.cli`` then ends with one line naming it."""
    hidden = (
        "import os, runpy, sys; "
        f"sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != {str(ROOT)!r}]; "
        "sys.argv = ['attnlab', '--version']; "
        "runpy.run_module('attnlab.cli', run_name='__main__', alter_sys=True)"
    )
    where = _clone_beside(tmp_path)
    res = subprocess.run([sys.executable, "-c", hidden], cwd=where, capture_output=True,
                         text=True)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"the folder {where / 'attnlab'} (named attnlab" in res.stderr
    assert "hides the installed attnlab package" in res.stderr
