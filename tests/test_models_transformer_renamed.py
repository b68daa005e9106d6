"""The transformer's ``model.columns`` (gru | transformer: what the decoder's columns come
from) was ``model.encoder``, which read as the config group ``encoder=`` (the shared column
encoder). Runs made before the rename still load: their checkpoints (read, eval, export,
init_from, resume), their ``.hydra/config.yaml`` (attnlab cost run=...) and the report's
variants, which take an old run and a new one of the same settings as seeds of one variant."""

from __future__ import annotations

import pytest
import torch
from helpers.readers import tiny_config, tiny_reader
from omegaconf import OmegaConf

from attnlab.config import plain_config
from attnlab.errors import UserError
from attnlab.models import registry
from attnlab.report.variants import flat_config
from attnlab.runs import checkpoint
from attnlab.tasks.cost_run import run_config

NAME = "transformer"


def old_style(columns: str) -> dict:
    """A tiny transformer run's config as a version before the rename wrote it."""
    plain = plain_config(tiny_config(NAME, f"model.columns={columns}"))
    model = dict(plain["model"])
    model["encoder"] = model.pop("columns")
    return {**plain, "model": model}


@pytest.mark.parametrize("columns", ["gru", "transformer"])
def test_an_old_checkpoint_naming_model_encoder_loads_with_its_weights(tmp_path, columns):
    m = tiny_reader(NAME, f"model.columns={columns}", seed=3)
    path = tmp_path / "old.pt"
    checkpoint.Checkpoint(m.name, m.state_dict(), old_style(columns)).save(path)
    reader, cfg = checkpoint.load(path).rebuild(path)
    assert cfg.model.columns == columns and "encoder" not in cfg.model
    assert len(reader.column_encoder.layers) == (cfg.model.enc_layers if columns != "gru" else 0)
    images = torch.rand(2, cfg.data.height, 96, generator=torch.Generator().manual_seed(0))
    widths = torch.tensor([96, 60])
    with torch.no_grad():  # the same weights read the same
        a, b = reader.read(images, widths), m.read(images, widths)
    assert a.texts == b.texts and torch.equal(a.confidence, b.confidence)


def test_an_old_runs_hydra_config_loads_as_columns(tmp_path):
    run = tmp_path / "old-run"
    (run / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(old_style("transformer")), run / ".hydra" / "config.yaml")
    cfg = run_config(str(run))
    assert cfg.model.columns == "transformer" and "encoder" not in cfg.model


def test_an_old_run_and_a_new_one_of_the_same_settings_are_one_variant():
    old = flat_config(OmegaConf.to_yaml(OmegaConf.create(old_style("transformer"))))
    new = flat_config(OmegaConf.to_yaml(tiny_config(NAME, "model.columns=transformer")))
    assert old["model.columns"] == new["model.columns"] == '"transformer"'
    assert old == new


def test_a_section_with_both_names_is_refused_in_one_line():
    with pytest.raises(UserError, match=r"model\.encoder is called model\.columns now"):
        registry.renamed(NAME, {"encoder": "gru", "columns": "transformer"})
    assert registry.renamed("attention", {"hidden": 8}) == {"hidden": 8}  # nothing renamed


def test_the_old_key_on_a_command_line_is_one_line_naming_the_new_one(attnlab_run, tmp_path):
    assert tiny_config(NAME, "model.columns=transformer").model.columns == "transformer"
    res = attnlab_run("train", "model=transformer", "model.encoder=transformer", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].endswith("model.encoder is called model.columns now")
