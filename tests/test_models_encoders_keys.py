"""Each encoder owns its keys (issue 57 item 1, issue 58 item 1): a key that only other
encoders read is refused in one line naming them (compose, the check, the CLI with exit
status 2); presets and readers that size every encoder still compose; fine-tuning keeps the
chosen encoder's keys as the source's; ``attnlab readers`` lists each encoder's keys under
it; every encoder's states come from the one BiGRU block. Encoders are found in the
registry, so a new one is covered the moment it exists."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from helpers.readers import strips, tiny_config
from helpers.runs import TINY, one_line_error

from attnlab.config import ModelConfig, check_experiment, plain_config
from attnlab.config.model import SHARED_SHAPE_KEYS
from attnlab.errors import UserError
from attnlab.models import encoders, registry
from attnlab.models.encoders._recurrent import ColumnStates
from attnlab.runs import checkpoint
from attnlab.tasks.compose import compose
from attnlab.tasks.readers import list_readers
from attnlab.training.finetune import encoder_keys

DEFAULTS = {f.name: f for f in dataclasses.fields(ModelConfig)}


def _default(key: str) -> str:
    """The schema's default of ``model.KEY`` as a command line writes it."""
    f = DEFAULTS[key]
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return json.dumps(value).replace(" ", "")


FOREIGN = [
    (chosen, key)
    for chosen in encoders.names()
    for key in sorted({k for n in encoders.names() for k in encoders.get(n).keys})
    if key not in encoders.get(chosen).keys
]


def test_every_encoder_has_a_key_another_lacks():
    """The table below is not empty: the lab's column encoder and the conv encoders differ."""
    assert ("column", "conv_channels") in FOREIGN and ("vgg", "column_mlp") in FOREIGN


@pytest.mark.parametrize(("chosen", "key"), FOREIGN)
def test_a_key_only_other_encoders_read_is_refused_naming_them(chosen, key):
    """Even at its default value: what is refused is setting it, since nothing reads it."""
    readers = [n for n in encoders.names() if key in encoders.get(n).keys]
    with pytest.raises(UserError) as err:
        compose(["preset=tiny", f"encoder={chosen}", f"model.{key}={_default(key)}"])
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"model.{key}: encoder={chosen} does not read")
    assert f"encoder={'|'.join(readers)}" in line


@pytest.mark.parametrize(
    "args, key, reader",
    [
        (["model=attention", "model.conv_channels=[64,64]"], "model.conv_channels", "vgg"),
        (["encoder=vgg", "model.column_convs=[8]"], "model.column_convs", "column"),
        (["encoder=vgg", "model.column_mlp=32"], "model.column_mlp", "column"),
    ],
)
def test_the_cli_refuses_another_encoder_s_key_in_one_line(
    attnlab_run, tmp_path, args, key, reader
):
    run = tmp_path / "r"
    res = attnlab_run("train", *TINY, *args, f"hydra.run.dir={run}", cwd=tmp_path)
    one_line_error(res, key, reader)
    assert not run.exists() or not any(run.iterdir())


def test_a_sweep_refuses_another_encoder_s_key_before_its_first_job(attnlab_run, tmp_path):
    res = attnlab_run(
        "train", "-m", *TINY, "encoder=resnet", "model.stem_channels=[4]", "seed=0,1",
        f"hydra.sweep.dir={tmp_path / 's'}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2 and "model.stem_channels" in res.stderr, res.stderr
    assert "encoder=column" in res.stderr and "Traceback" not in res.stderr
    assert "checked before any job started" in res.stderr  # refused whole, no job ran
    assert not list((tmp_path / "s").glob("*/checkpoints")), "a job ran before the refusal"


@pytest.mark.parametrize("name", encoders.names())
def test_presets_and_readers_that_size_every_encoder_still_compose(name):
    """preset=tiny sets the sizes of every encoder, model=crnn its conv_channels: neither is
    the user's, so neither is refused; the chosen encoder's own keys are accepted."""
    for reader in ("attention", "crnn"):  # the lab's, and the reader with its own sizes
        check_experiment(compose(["preset=tiny", f"model={reader}", f"encoder={name}"]))
    own = [f"model.{k}={_default(k)}" for k in encoders.get(name).keys]
    check_experiment(compose(["preset=tiny", f"encoder={name}", *own]))


def test_an_old_config_with_every_encoder_s_keys_still_loads(tmp_path):
    """A checkpoint whose config holds the other encoders' keys at values of its own (every
    config written before the encoders owned their keys does) rebuilds and reads."""
    cfg = tiny_config("attention")
    torch.manual_seed(0)
    m = registry.build(cfg.model, cfg.data.height).eval()
    config = plain_config(cfg)
    config["model"]["conv_channels"] = [3, 5, 7]
    path = checkpoint.Checkpoint(m.name, m.state_dict(), config).save(tmp_path / "old.pt")
    back, _ = checkpoint.load(path).rebuild(path)
    s = strips([2, 4])
    with torch.no_grad():
        assert back.read(s.images, s.widths).texts == m.read(s.images, s.widths).texts


@pytest.mark.parametrize("name", encoders.names())
def test_fine_tuning_keeps_the_chosen_encoder_s_own_keys(name):
    cfg = compose(["preset=tiny", f"encoder={name}"])
    keys = encoder_keys(cfg.model)
    assert set(keys) == {"backbone", *SHARED_SHAPE_KEYS, *encoders.get(name).keys}


def test_the_readers_listing_shows_each_encoder_s_keys_under_it():
    lines: list[str] = []
    list_readers(None, lines.append)
    start = next(i for i, line in enumerate(lines) if line.startswith("every reader"))
    heads = [i for i, line in enumerate(lines) if line.startswith("encoder=")]
    assert [lines[i].split()[0] for i in heads] == [f"encoder={n}" for n in encoders.names()]
    shared = " ".join(lines[start : heads[0]])
    for i, name in zip(heads, encoders.names(), strict=True):
        end = next((j for j in heads if j > i), len(lines))
        block = " ".join(lines[i:end])
        for key in encoders.get(name).keys:
            assert f"model.{key}=" in block and f"model.{key}=" not in shared


@pytest.mark.parametrize("name", encoders.names())
def test_every_encoder_states_come_from_the_one_bigru_block(name):
    """One forward for every encoder (``_recurrent.ColumnStates``): features -> packed BiGRU
    -> states, lengths, summary; built without it, the encoder refuses to be called."""
    spec = encoders.get(name)
    assert issubclass(spec.encoder, ColumnStates) and spec.encoder.forward is ColumnStates.forward
    cfg = tiny_config("attention", f"encoder={name}")
    enc = spec.encoder(cfg.model, cfg.data.height, recurrent=False).eval()
    s = strips([2, 5])
    feats, lengths = enc.features(s.images, s.widths)
    assert feats.shape == (2, int(lengths.max()), enc.state_size)
    with pytest.raises(RuntimeError, match="without its BiGRU"):
        enc(s.images, s.widths)
