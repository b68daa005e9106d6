"""requirements.lock, pyproject.toml and lock-pins.toml read as data (tests/test_lock_*.py).

``locked(text)`` parses pip-compile's output: one ``name==version \\`` line per package,
followed by its ``--hash=`` lines and its ``# via`` comment lines, all indented.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def read_pins() -> dict[str, Any]:
    return tomllib.loads(PINS.read_text(encoding="utf-8"))


def write_pin(key: str, value: Any) -> None:
    """Set ``key`` in lock-pins.toml (a text, a number or a table of them), its comment
    header and every other value kept (ATTNLAB_UPDATE_PINS=1)."""
    text = PINS.read_text(encoding="utf-8")
    header = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            break
        header.append(line)
    pins = {**tomllib.loads(text), key: value}
    body = _pairs(pins)
    for name, table in pins.items():
        if isinstance(table, dict):
            body += ["", f"[{name}]", *_pairs(table)]
            for sub, inner in table.items():
                if isinstance(inner, dict):
                    body += ["", f"[{name}.{sub}]", *_pairs(inner, inline=True)]
    PINS.write_text("\n".join([*header, *body]) + "\n", encoding="utf-8")


def _pairs(table: dict[str, Any], inline: bool = False) -> list[str]:
    """``key = value`` lines of a table's plain values (its tables too when ``inline``)."""
    return [
        f"{_key(k)} = {_toml(v)}" for k, v in table.items() if inline or not isinstance(v, dict)
    ]


def _toml(value: Any) -> str:
    """A value as TOML writes it: texts quoted, numbers as Python's repr, tables inline."""
    if value is None:
        return '""'
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


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


# What a user compares of a tiny training: metrics.json's validation numbers at its end and
# at its best step (exact-string accuracy and CER over the validation strips).
NUMBERS = ("val.exact_acc", "val.cer", "best.exact_acc", "best.cer")


def run_numbers(run: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """A finished training run's validation numbers (``NUMBERS``) and its ``drawn_by``."""
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    numbers = {}
    for name in NUMBERS:
        part, key = name.split(".")
        numbers[name.replace(".", "_")] = float(metrics[part][key])
    return numbers, metrics["drawn_by"]
