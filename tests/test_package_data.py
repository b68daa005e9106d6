"""pyproject.toml declares every folder the wheel ships as a package (issue 51): a folder of
data files under a package that is not itself listed (attnlab/report/templates was) makes
setuptools warn "Package 'attnlab.report.templates' ... would be ignored" on every install,
and a folder of modules left out is missing from the wheel."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and newer, as CI and make test run

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def folders(top: str, package: str) -> dict[str, Path]:
    """Each folder under ``top`` that holds files, by the package name it installs as."""
    out = {}
    for folder in [ROOT / top, *sorted((ROOT / top).rglob("*"))]:
        if (
            folder.is_dir()
            and folder.name != "__pycache__"
            and any(f.is_file() for f in folder.iterdir())
        ):
            rel = folder.relative_to(ROOT / top).parts
            out[".".join([package, *rel])] = folder
    return out


def test_every_folder_the_package_ships_is_a_listed_package():
    shipped = folders("attnlab", "attnlab") | folders("conf", "attnlab.conf")
    missing = sorted(set(shipped) - set(SETUPTOOLS["packages"]))
    assert not missing, f"pyproject.toml's packages lack {missing}"
    assert "attnlab.report.templates" in shipped


def test_every_template_file_is_package_data():
    folder = ROOT / "attnlab" / "report" / "templates"
    globs = SETUPTOOLS["package-data"]["attnlab.report.templates"]
    files = [f.name for f in folder.iterdir() if f.is_file()]
    assert len(files) >= 10
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []
