"""requirements.lock installs what pyproject.toml asks for, and this environment is the lock's.

The Makefile installs the lock (``make install``, ``make demo``, ``make test``, CI's
``.ci/run``) and ``make lock`` writes it from pyproject.toml: when the two disagree (a
dependency added, a bound raised, one removed) these tests say which, and ``make lock`` is
the fix. They read both files as data (tests/helpers/lock.py).
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import io
import os
import re
import subprocess
import tarfile
from importlib import metadata
from pathlib import Path

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


# The private names (a leading underscore) of other packages that hydra_plugins/attnlab_slurm
# uses (issue 57), each with its package and why no public API does the job; names that
# launcher.py defines itself do not count. submitit's are gone (_sub_jobs, _registered,
# _finished, _info_dict, _make_command): the launcher waits through submitit's public Job API
# (job_id, paths, num_tasks, task(), results(), state, stderr()) and its own squeue calls.
SLURM_PRIVATE = {
    "_EXECUTOR": (
        "hydra-submitit-launcher",
        "the plugin's launch, copied from 1.2.0 up to its wait (the plugin builds the "
        "executor and waits in one method), names the executor by its class's _EXECUTOR",
    ),
}
# Bounded whatever the names: the copied launch calls the plugin's own __call__ on the node
# with 1.2.0's arguments.
COPIED_FROM = {"hydra-submitit-launcher"}
CHECKED_ON = {"submitit": ("1.5.4", "1.6"), "hydra-submitit-launcher": ("1.2.0", "1.3")}
SLURM_LAUNCHER = ROOT / "hydra_plugins" / "attnlab_slurm" / "launcher.py"


def defined_names(tree: ast.AST) -> set[str]:
    """The names a module defines: functions, classes, methods, assigned names and
    attributes (``self._x = ...``)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        for target in getattr(n, "targets", None) or [getattr(n, "target", None)]:
            if isinstance(target, ast.Name):
                names.add(target.id)
            elif isinstance(target, ast.Attribute):
                names.add(target.attr)
    return names


def dependency_names() -> set[str]:
    """The names that the SLURM launcher's dependencies (submitit, the plugin) define."""
    names: set[str] = set()
    for package in ("submitit", "hydra_plugins.hydra_submitit_launcher"):
        folder = Path(importlib.util.find_spec(package).submodule_search_locations[0])
        for path in folder.rglob("*.py"):
            names |= defined_names(ast.parse(path.read_text(encoding="utf-8")))
    return names


def private_names_used(source: str, theirs: set[str]) -> set[str]:
    """The private names of its dependencies (``theirs``: the names they define) that
    ``source`` uses: attributes, imported names and modules, keyword arguments, names given
    to getattr/setattr as strings, and those it overrides (a method of theirs redefined)."""
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    used = {n.attr for n in nodes if isinstance(n, ast.Attribute)}
    used |= {n.arg for n in nodes if isinstance(n, ast.keyword) and n.arg}
    used |= {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for n in nodes:
        if isinstance(n, ast.ImportFrom):
            used |= {a.name for a in n.names} | set((n.module or "").split("."))
        elif isinstance(n, ast.Import):
            used |= {part for a in n.names for part in a.name.split(".")}
    defined = defined_names(tree)
    named = (used | defined) - (defined - theirs)  # a name only it defines is its own
    return {u for u in named if re.fullmatch(r"_[A-Za-z]\w*", u) and not u.endswith("__")}


def bound_problems(
    dependencies: list[str], used: set[str], declared: dict[str, tuple[str, str]] = SLURM_PRIVATE
) -> list[str]:
    """Why pyproject's ``dependencies`` do not bound the packages whose private names the
    SLURM launcher uses (``used``, each ``declared``) to the versions it was checked on; []
    when they do."""
    deps = {Requirement(d).name: Requirement(d) for d in dependencies}
    owners = {declared[n][0] for n in used} | COPIED_FROM
    problems = []
    for name, (checked, next_minor) in CHECKED_ON.items():
        spec = deps.get(name)
        if spec is None or not spec.specifier.contains(checked):
            problems.append(f"pyproject.toml: {name} must be a dependency that allows {checked}")
        elif name in owners and spec.specifier.contains(next_minor):
            why = [f"{n} ({declared[n][1]})" for n in sorted(used) if declared[n][0] == name]
            if name in COPIED_FROM:
                why.append(f"its launch copied from {checked}")
            problems.append(
                f"pyproject.toml allows {name}{spec.specifier} (>= {next_minor}), but "
                f"{SLURM_LAUNCHER.relative_to(ROOT)} uses its private API, checked on {checked} "
                f"only: {'; '.join(why)}. Keep {name}<{next_minor}, or move the launcher to "
                "public API first"
            )
    return problems


def test_the_private_api_the_slurm_launcher_uses_is_bounded_to_the_versions_checked():
    used = private_names_used(SLURM_LAUNCHER.read_text(), dependency_names())
    assert used == set(SLURM_PRIVATE), (
        f"{SLURM_LAUNCHER.relative_to(ROOT)} uses the private names {sorted(used)}, declared "
        f"{sorted(SLURM_PRIVATE)}: declare each (package, why) in SLURM_PRIVATE, or drop it"
    )
    dependencies = read_pyproject()["project"]["dependencies"]
    assert bound_problems(dependencies, used) == []
    for name in CHECKED_ON:
        spec = next(Requirement(d) for d in dependencies if Requirement(d).name == name)
        assert spec.specifier.contains(metadata.version(name)), (name, metadata.version(name))


def test_lifting_a_bound_the_slurm_launcher_needs_fails_naming_the_private_names():
    """What the test above says when someone lifts a bound: hydra-submitit-launcher's (the
    launch copied, _EXECUTOR), or submitit's once the launcher reads submitit's private
    state again (its job watcher's _registered, as it once did)."""
    dependencies = read_pyproject()["project"]["dependencies"]
    lifted = [re.sub(r",\s*<1\.3", "", d) if d.startswith("hydra-submitit") else d
              for d in dependencies]  # fmt: skip
    assert any(d.startswith("hydra-submitit-launcher") and "<" not in d for d in lifted)
    said = bound_problems(lifted, {"_EXECUTOR"})
    assert len(said) == 1 and said[0].startswith(
        "pyproject.toml allows hydra-submitit-launcher>=1.2 (>= 1.3), but "
        "hydra_plugins/attnlab_slurm/launcher.py uses its private API, checked on 1.2.0 only: "
        "_EXECUTOR (the plugin's launch"
    ), said
    assert said[0].endswith("its launch copied from 1.2.0. Keep hydra-submitit-launcher<1.3, "
                            "or move the launcher to public API first")  # fmt: skip

    declared = {**SLURM_PRIVATE, "_registered": ("submitit", "its job watcher's registered jobs")}
    unbounded = [d for d in dependencies if not d.startswith("submitit")] + ["submitit>=1.5"]
    said = bound_problems(unbounded, {"_EXECUTOR", "_registered"}, declared)
    assert len(said) == 1 and said[0].startswith(
        "pyproject.toml allows submitit>=1.5 (>= 1.6), but hydra_plugins/attnlab_slurm/"
        "launcher.py uses its private API, checked on 1.5.4 only: _registered (its job watcher"
    ), said

    # the names are found however they are reached
    source = "job._sub_jobs\ngetattr(w, '_info_dict')\nJobReturn(_return_value=1)\n"
    source += "from submitit.core._submit import x\nclass A:\n    _mine = 1\n"
    source += "    def _make_command(self): ...\n    def _own(self): self._own_too = 1\n"
    got = private_names_used(source, dependency_names() | {"_return_value"})
    assert got == {"_sub_jobs", "_info_dict", "_return_value", "_submit", "_make_command"}
