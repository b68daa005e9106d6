"""requirements.lock, pyproject.toml and lock-pins.toml read as data (tests/test_lock_*.py).

``locked(text)`` parses pip-compile's output: one ``name==version \\`` line per package,
followed by its ``--hash=`` lines and its ``# via`` comment lines, all indented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
PINS = ROOT / "lock-pins.toml"
PYPROJECT = ROOT / "pyproject.toml"


@dataclass
class Pin:
    version: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)  # what pulled it in (pip-compile's comments)


def locked(text: str) -> dict[str, Pin]:
    """Canonical package name -> its pin, from the text of a pip-compile lock."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in text.splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*\\?$", line):
            current = pins.setdefault(canonicalize_name(m[1]), Pin(m[2]))
        elif not line.strip() or not line[0].isspace():
            current = None  # a blank line or a top-level comment ends a package's block
        elif current is not None:
            item = line.strip().rstrip("\\").strip()
            if item.startswith("--hash="):
                current.hashes.append(item.removeprefix("--hash="))
            elif item.startswith("#"):
                via = item.lstrip("#").strip().removeprefix("via").strip()
                current.via += [via] if via else []
    return pins


def project_requirements(pyproject: dict) -> list[Requirement]:
    """The package's dependencies and its dev extra, with the extras it names of itself
    (``attnlab[export]``) expanded: what ``pip install -e ".[dev]"`` asks for."""
    project = pyproject["project"]
    extras = project.get("optional-dependencies", {})
    name = canonicalize_name(project["name"])
    out, todo, seen = [], ["dev"], set()
    reqs = [Requirement(r) for r in project["dependencies"]]
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for req in map(Requirement, extras[extra]):
            if canonicalize_name(req.name) == name:
                todo += [e for e in req.extras if e not in seen]
            else:
                reqs.append(req)
    for req in reqs:
        if req.marker is None or req.marker.evaluate():
            out.append(req)
    return out


def read_pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def torch_pin(makefile: str) -> str:
    """The Makefile's default TORCH_PIN (``torch==2.13.0``)."""
    m = re.search(r"^TORCH_PIN \?= *(\S+)", makefile, re.M)
    assert m, "Makefile has no TORCH_PIN ?= line"
    return m[1]


def read_pins() -> dict[str, str]:
    return tomllib.loads(PINS.read_text(encoding="utf-8"))


def write_pin(key: str, value: str) -> None:
    """Set ``key = "value"`` in lock-pins.toml, its comments kept (ATTNLAB_UPDATE_PINS=1)."""
    text = PINS.read_text(encoding="utf-8")
    line = f'{key} = "{value}"'
    pattern = re.compile(rf"^{re.escape(key)} = .*$", re.M)
    text = pattern.sub(line, text) if pattern.search(text) else text.rstrip("\n") + f"\n{line}\n"
    PINS.write_text(text, encoding="utf-8")


def disagreements(pyproject: dict, lock_text: str) -> list[str]:
    """Where requirements.lock does not install what pyproject.toml asks for: a dependency
    not locked, locked at a version its specifier refuses, or a pin without hashes; and a
    package locked for pyproject alone that pyproject no longer names."""
    pins = locked(lock_text)
    wanted = project_requirements(pyproject)
    out = []
    for req in wanted:
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            out.append(f"{req} is not in requirements.lock")
        elif not req.specifier.contains(pin.version, prereleases=True):
            out.append(f"{req} but requirements.lock has {req.name}=={pin.version}")
    names = {canonicalize_name(r.name) for r in wanted}
    project = pyproject["project"]["name"]
    ours = {project, f"{project} (pyproject.toml)"}  # pip-compile's "# via" for us
    for name, pin in sorted(pins.items()):
        if not pin.hashes:
            out.append(f"{name}=={pin.version} has no --hash (pip --require-hashes refuses it)")
        if pin.via and all(v in ours for v in pin.via) and name not in names:
            out.append(f"{name}=={pin.version} is locked for pyproject.toml, which no longer asks")
    return out


def run_digest(run: Path) -> str:
    """What a finished training run computed, hashed: its last weights (every tensor's
    bytes, by name) and its validation numbers (metrics.json val and best)."""
    import hashlib
    import json

    import torch

    h = hashlib.sha256()
    model = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["model"]
    for name in sorted(model):
        h.update(name.encode())
        h.update(model[name].detach().cpu().contiguous().numpy().tobytes())
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    h.update(json.dumps([metrics["val"], metrics["best"]], sort_keys=True).encode())
    return h.hexdigest()[:16]
