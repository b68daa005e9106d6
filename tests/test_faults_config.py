"""Config values a type cannot rule out: each is refused naming its key, in one line and
exit status 2 from the CLI (the faults issue's item [8]); the defaults pass their checks."""

from __future__ import annotations

import pytest
from helpers.runs import TINY, one_line_error

from attnlab.config import EvalConfig, check_experiment
from attnlab.errors import UserError
from attnlab.models import registry
from attnlab.tasks.compose import compose


@pytest.fixture(scope="module")
def compose_train():
    def make(*overrides: str):
        return compose(["preset=tiny", *overrides])

    return make


BAD_TRAINING = [
    ("optim.lr=-1", "optim.lr"),
    ("optim.lr=nan", "optim.lr"),
    ("optim.weight_decay=nan", "optim.weight_decay"),
    ("optim.ema=1", "optim.ema"),
    ("optim.ema=-0.5", "optim.ema"),
    ("optim.schedule=triangle", "optim.schedule"),
    ("train.val_every=0", "train.val_every"),
    ("train.log_every=0", "train.log_every"),
    ("train.checkpoint_every=0", "train.checkpoint_every"),
    ("data.train_length_set=[0,2]", "data.train_length_set"),
    ("data.train_length_set=[-1]", "data.train_length_set"),
    ("data.height=-4", "data.height"),
    ("data.height=7", "data.height"),
    ("data.val_per_length=0", "data.val_per_length"),
    ("model.hidden=0", "model.hidden"),
    ("model.layers=0", "model.layers"),
    ("train.batch_size=10000000", "train.accumulate"),
    ("data.font_sizes=[0]", "data.font_sizes"),
    ("data.noise=[nan,0.1]", "data.noise"),
    ("data.scale=[1.2,0.9]", "data.scale"),
    ("eval.batch_size=0", "eval.batch_size"),
    ("eval.beam=0", "eval.beam"),
    ("model.stride=3", "model.stride"),
    ("model.stem_channels=[8] model.stride=8", "model.stride"),
    ("model.stem_channels=[8,8] data.height=34", "data.height"),
    # A reader's own fields, checked by its own config class (each reader's check()).
    ("model=attention model.attn_dim=0", "model.attn_dim"),
    ("model=attention model.ctc_aux=-1", "model.ctc_aux"),
    ("model=fixed model.dec_hidden=0", "model.dec_hidden"),
    ("model=location model.loc_kernel=4", "model.loc_kernel"),
    ("model=location model.loc_channels=0", "model.loc_channels"),
    ("model=window model.pace=0", "model.pace"),
    ("model=window model.components=0", "model.components"),
    ("model=transformer model.heads=3", "model.heads"),
    ("model=transformer model.dropout=1.5", "model.dropout"),
]


@pytest.mark.parametrize("override, key", BAD_TRAINING)
def test_values_a_type_cannot_rule_out_are_checked(compose_train, override, key):
    cfg = compose_train(*override.split())
    with pytest.raises(UserError, match=key.replace(".", r"\.")):
        check_experiment(cfg)


def test_the_default_configs_pass_their_checks(compose_train):
    for name in registry.names():
        check_experiment(compose_train(f"model={name}"))
        check_experiment(compose_train(f"model={name}", "preset=cpu"))


@pytest.mark.parametrize(
    "args, key",
    [(["--n", "0"], "eval.n"), (["--n", "-3"], "eval.n"), (["--beam", "0"], "eval.beam"),
     (["--beam", "-2"], "eval.beam"), (["eval.batch_size=0"], "eval.batch_size")],
)  # fmt: skip
def test_bad_evaluation_values_are_one_line(trained, attnlab_run, tmp_path, args, key):
    res = attnlab_run("eval", trained["attention"], *args, cwd=tmp_path)
    one_line_error(res, key)
    assert not (trained["attention"] / "eval").exists() or not any(
        p.name.endswith(".partial") for p in (trained["attention"] / "eval").iterdir()
    )


def test_a_bad_training_value_is_one_line_from_the_cli(attnlab_run, tmp_path):
    res = attnlab_run(
        "train", *TINY, "optim.lr=nan", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path
    )
    one_line_error(res, "optim.lr")


def test_check_eval_accepts_the_defaults():
    EvalConfig.check(EvalConfig())


def test_eval_lengths_are_capped():
    with pytest.raises(UserError, match=r"eval\.lengths.*64"):
        EvalConfig.check(EvalConfig(lengths=[1, 1000]))
    EvalConfig.check(EvalConfig(lengths=[1, 64]))
