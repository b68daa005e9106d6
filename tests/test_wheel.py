"""The configs ship inside the built wheel: an installed attnlab works away from the repo.

The wheel is built from a copy of the source tree (so the repo gets no build/ folder) and
installed into a fresh venv that sees the dev venv's site-packages through a ``.pth`` file
(torch and friends are not reinstalled). ``.pth`` files inside that directory are not
processed, so the editable attnlab of the dev venv stays invisible: only the wheel is used.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
_ANYWHERE = shutil.ignore_patterns(".git", "__pycache__", ".*_cache", "*.egg-info")
_TOP_LEVEL = {  # outputs of the tool at the top of the repo, not the package's report/
    ".venv",
    "venv",
    "build",
    "dist",
    "outputs",
    "multirun",
    "report",
    "tests",
    ".whl",
    ".gl",
}


def NOT_SOURCE(folder: str, names: list[str]) -> set[str]:
    skip = set(_ANYWHERE(folder, names))
    if Path(folder).resolve() == REPO:
        skip |= _TOP_LEVEL & set(names)
    return skip


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, (cmd, result.stdout[-3000:], result.stderr[-3000:])
    return result


@pytest.mark.slow
def test_wheel_ships_configs(tmp_path, cli_env, attnlab_cli):
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=NOT_SOURCE)
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", dist, src],
        tmp_path, cli_env,
    )  # fmt: skip
    (wheel,) = dist.glob("attnlab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for cfg in ("train", "sweep", "evaluate", "strips", "preset/tiny", "hydra/launcher/slurm"):
        assert f"attnlab/conf/{cfg}.yaml" in names, cfg
    for shipped in (  # readers are found by listing their package; the page needs templates
        "attnlab/models/readers/attention.py", "attnlab/models/readers/fixed.py",
        "attnlab/conf/model/attention.yaml", "attnlab/conf/preset_model/tiny_fixed.yaml",
        "attnlab/report/templates/index.html.j2", "attnlab/export/runtime.py",
        "attnlab/report/templates/explorer.js", "attnlab/report/templates/explorer.css",
        # hydra/launcher=slurm and =parallel, in the hydra_plugins namespace package (Hydra
        # finds them there)
        "hydra_plugins/attnlab_slurm/__init__.py", "hydra_plugins/attnlab_slurm/launcher.py",
        "hydra_plugins/attnlab_parallel/launcher.py",
    ):  # fmt: skip
        assert shipped in names, shipped
    assert "hydra_plugins/__init__.py" not in names  # it would hide the other plugins

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path, cli_env)
    python = venv / "bin" / "python"
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        tmp_path, cli_env,
    ).stdout.strip()  # fmt: skip
    dev_site = sysconfig.get_paths()["purelib"]  # the dev venv's: torch, hydra, pip, ...
    Path(purelib, "_dev_site.pth").write_text(dev_site + "\n")
    # pip comes from the dev venv but installs into the running interpreter's (new) venv;
    # --ignore-installed: never touch the dev venv's editable attnlab.
    _run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
         "-q", wheel],
        tmp_path, cli_env,
    )  # fmt: skip

    away = tmp_path / "elsewhere"
    away.mkdir()
    where = _run(
        [python, "-c", "import attnlab, importlib.resources as r; print(attnlab.__file__); "
         "print(r.files('attnlab.conf').joinpath('train.yaml').is_file())"],
        away, cli_env,
    ).stdout.split()  # fmt: skip
    assert Path(where[0]).resolve().is_relative_to(Path(purelib).resolve()), where
    assert not Path(where[0]).resolve().is_relative_to(REPO), where
    assert where[1] == "True"

    result = attnlab_cli(
        "data", "preview", "preview.out=x.png", "preview.n=3", "data=clean",
        cwd=away, python=str(python),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with Image.open(away / "x.png") as im:
        assert im.format == "PNG" and im.size[1] == round(100 * (0.45 * 3 + 0.6))

    result = attnlab_cli("train", "--cfg", "job", "preset=tiny", cwd=away, python=str(python))
    assert result.returncode == 0, result.stderr
    cfg = yaml.safe_load(result.stdout)
    assert cfg["data"]["train_lengths"] == [1, 3] and cfg["model"]["name"] == "attention"
    assert sorted(p.name for p in away.iterdir()) == ["x.png"]

    result = attnlab_cli("readers", cwd=away, python=str(python))
    assert result.returncode == 0, result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines()]
    assert listed[:2] == ["fixed", "attention"] and len(listed) >= 2  # the lab's two first
    loaded = _run(
        [python, "-c", "from attnlab.report.html import environment; "
         "print(environment().get_template('index.html.j2').name)"],
        away, cli_env,
    )  # fmt: skip
    assert loaded.stdout.strip() == "index.html.j2"


def test_every_package_of_the_tree_is_listed_for_the_wheel():
    """pyproject.toml lists its packages by hand (conf/ is mapped to attnlab.conf): a new
    subpackage that is not listed would be missing from an installed attnlab."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "attnlab").rglob("__init__.py")
    }
    found |= {
        "attnlab.conf" + "".join("." + s for s in p.parent.relative_to(REPO / "conf").parts)
        for p in (REPO / "conf").rglob("__init__.py")
    }
    assert found <= listed, sorted(found - listed)
