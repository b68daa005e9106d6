"""requirements.lock installs what pyproject.toml asks for, and this environment is the lock's.

The Makefile installs the lock (``make install``, ``make demo``, ``make test``, CI's
``.ci/run``) and ``make lock`` writes it from pyproject.toml: when the two disagree (a
dependency added, a bound raised, one removed) these tests say which, and ``make lock`` is
the fix. They read both files as data (tests/helpers/lock.py).
"""

from __future__ import annotations

import copy
import io
import os
import subprocess
import tarfile
from importlib import metadata

import pytest
from helpers.lock import (
    LOCK,
    ROOT,
    disagreements,
    locked,
    read_pyproject,
    torch_pin,
)
from packaging.requirements import Requirement

from attnlab.runs.drawn import PACKAGES


def test_the_lock_installs_what_pyproject_asks_for():
    wrong = disagreements(read_pyproject(), LOCK.read_text(encoding="utf-8"))
    assert not wrong, "requirements.lock disagrees with pyproject.toml (run `make lock`):\n" + (
        "\n".join(wrong)
    )


def test_a_pyproject_the_lock_does_not_fit_is_named():
    """The check above can fail: a raised bound, a new dependency and a removed one are each
    named (the lock of today read against edited copies of pyproject.toml)."""
    text = LOCK.read_text(encoding="utf-8")
    pins = locked(text)
    project = read_pyproject()
    raised = copy.deepcopy(project)
    deps = raised["project"]["dependencies"]
    i = next(i for i, d in enumerate(deps) if Requirement(d).name == "pandas")
    deps[i] = f"pandas>{pins['pandas'].version}"
    deps.append("a-package-nobody-locked>=1")
    removed = copy.deepcopy(project)
    removed["project"]["dependencies"] = [
        d for d in removed["project"]["dependencies"] if Requirement(d).name != "rapidfuzz"
    ]
    said = disagreements(raised, text)
    assert any(s.startswith("pandas>") and "requirements.lock has pandas==" in s for s in said)
    assert any(s.startswith("a-package-nobody-locked>=1 is not in") for s in said)
    gone = disagreements(removed, text)
    assert any(s.startswith("rapidfuzz==") and "no longer" in s for s in gone)


def test_torch_is_locked_at_the_makefiles_pin_and_dev_tools_are_locked():
    pins = locked(LOCK.read_text(encoding="utf-8"))
    pin = Requirement(torch_pin((ROOT / "Makefile").read_text(encoding="utf-8")))
    assert pin.specifier.contains(pins["torch"].version), (pin, pins["torch"].version)
    for tool in ("pytest", "ruff", "pip-tools", "pip", "setuptools"):
        assert tool in pins, f"{tool} is not locked"


def test_this_environment_has_the_locked_versions_of_what_draws_the_numbers():
    """The packages that move a run's numbers (attnlab.runs.drawn) are installed at the
    lock's versions: `make install` installed the lock (a `pip install -e .` environment
    of one's own versions fails here, and its numbers may differ from the pinned ones)."""
    pins = locked(LOCK.read_text(encoding="utf-8"))
    other = {
        name: (metadata.version(name), pins[name].version)
        for name in PACKAGES
        if metadata.version(name) != pins[name].version
    }
    assert not other, f"installed (left) is not the lock's (right); run `make install`: {other}"


def test_make_lock_without_an_index_is_one_line_and_leaves_the_lock(tmp_path):
    """No network (an index that refuses): one line naming why, the lock as it was. Run in
    a copy of the committed tree, this environment's pip-tools, pip's own config ignored."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "pip-compile").is_file():
        pytest.skip("no .venv with pip-tools (make install makes one)")
    tree = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(tree.stdout)) as tar:
        tar.extractall(tmp_path, filter="data")
    before = (tmp_path / "requirements.lock").read_bytes()
    outer = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if k not in outer and not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/simple",
               PIP_RETRIES="0", PIP_TIMEOUT="2")  # fmt: skip
    done = subprocess.run(
        ["make", "--no-print-directory", "lock", f"VENV={venv}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = [line for line in done.stderr.splitlines() if not line.startswith("make: ***")]
    assert done.returncode != 0 and len(said) == 1, done.stderr
    assert said[0].startswith("make lock: pip-compile failed (") and "left as it was" in said[0]
    assert (tmp_path / "requirements.lock").read_bytes() == before


# What hydra_plugins/attnlab_slurm uses beyond the public API (issue 57), and the versions it
# was checked on: the plugin's launch is copied from 1.2.0; submitit's job watcher is
# subclassed, reading its private state.
SLURM_PRIVATE = ("_sub_jobs", "_registered", "_finished", "_info_dict", "_make_command")
CHECKED_ON = {"submitit": ("1.5.4", "1.6"), "hydra-submitit-launcher": ("1.2.0", "1.3")}


def test_the_private_api_the_slurm_launcher_uses_is_bounded_to_the_versions_checked():
    source = (ROOT / "hydra_plugins" / "attnlab_slurm" / "launcher.py").read_text()
    used = [name for name in SLURM_PRIVATE if name in source]
    deps = {
        Requirement(d).name: Requirement(d) for d in read_pyproject()["project"]["dependencies"]
    }
    for name, (checked, next_minor) in CHECKED_ON.items():
        spec = deps.get(name)
        assert spec is not None, f"pyproject.toml: {name} must be a bounded dependency"
        assert spec.specifier.contains(checked), f"{name}{spec.specifier} excludes {checked}"
        if used or name == "hydra-submitit-launcher":
            assert not spec.specifier.contains(next_minor), (
                f"pyproject.toml allows {name}{spec.specifier} (>= {next_minor}), but "
                f"hydra_plugins/attnlab_slurm/launcher.py uses its private API ({', '.join(used)}; "
                f"the plugin's launch copied from 1.2.0), checked on {checked} only: keep the "
                "upper bound, or move the launcher to submitit's public Job API first"
            )
        assert metadata.version(name) == checked or spec.specifier.contains(metadata.version(name))
