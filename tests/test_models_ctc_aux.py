"""The step-wise readers' auxiliary CTC loss (``model.ctc_aux``): what it adds to training,
and that reading, checkpoints and the other readers do not change with it."""

import pytest
import torch
from helpers.readers import strips, tiny_config

from attnlab.config import check_experiment
from attnlab.errors import UserError
from attnlab.models import registry
from attnlab.models.ctc_loss import CLASSES, ctc_nll
from attnlab.runs import checkpoint


def build(name: str, *overrides: str):
    cfg = tiny_config(name, *overrides)
    torch.manual_seed(0)
    return registry.build(cfg.model, cfg.data.height), cfg


def test_the_loss_is_the_cross_entropy_plus_the_weighted_ctc_of_the_column_states():
    s = strips([1, 3, 6])
    on, _ = build("attention", "model.ctc_aux=0.5")
    off, _ = build("attention", "model.ctc_aux=0")
    assert off.ctc_head is None and on.ctc_head.out_features == CLASSES
    off.load_state_dict({k: v for k, v in on.state_dict().items() if not k.startswith("ctc_")})
    ce = off.loss(s.images, s.widths, s.labels)
    memory = on.encode(s.images, s.widths)
    logp = torch.log_softmax(on.ctc_head(memory.states), -1)
    # ctc_nll is the CTC reader's own loss (checked path by path in test_models_ctc.py).
    want = ce + 0.5 * ctc_nll(logp, memory.lengths, s.labels)
    assert torch.allclose(on.loss(s.images, s.widths, s.labels), want, atol=1e-5)
    assert float(on.loss(s.images, s.widths, s.labels).detach()) > float(ce.detach())  # CTC > 0


def test_the_ctc_term_trains_the_encoder_and_reading_never_uses_its_classifier():
    s = strips([2, 5])
    m, _ = build("attention", "model.ctc_aux=1.0")
    m.eval()
    before = m.read(s.images, s.widths)
    with torch.no_grad():
        m.ctc_head.weight.normal_()  # reading must not depend on the auxiliary classifier
    after = m.read(s.images, s.widths)
    assert before.texts == after.texts and torch.equal(before.confidence, after.confidence)
    # The reader's loss sends the CTC term back into the encoder: its gradient there is not
    # the cross-entropy's alone (the same reader with the term weighted 0).
    grads = []
    for weight in (1.0, 0.0):
        m.ctc_aux = weight
        m.zero_grad()
        m.loss(s.images, s.widths, s.labels).backward()
        grads.append(m.encoder.gru.weight_ih_l0.grad.clone())
    assert not torch.allclose(grads[0], grads[1])


def test_a_strip_too_narrow_for_its_ctc_path_adds_nothing_rather_than_infinity():
    torch.manual_seed(0)
    logp = torch.log_softmax(torch.randn(2, 3, CLASSES), -1)
    cols = torch.tensor([3, 3])  # "111" needs 5 columns (a blank between repeats); "12" fits
    alone = ctc_nll(logp[1:], cols[1:], ["12"])
    both = ctc_nll(logp, cols, ["111", "12"], zero_infinity=True)
    assert torch.isfinite(both) and torch.allclose(both * 5, alone * 2)  # per label digit
    assert torch.isinf(ctc_nll(logp, cols, ["111", "12"]))


@pytest.mark.parametrize("name", ["fixed", "location", "window", "transformer"])
def test_every_step_wise_reader_can_train_with_it(name):
    s = strips([1, 4])
    m, cfg = build(name, "model.ctc_aux=0.3")
    memory = m.encode(s.images, s.widths)
    assert m.ctc_head.in_features == memory.states.shape[-1]
    loss = m.loss(s.images, s.widths, s.labels)
    loss.backward()
    assert torch.isfinite(loss) and m.ctc_head.weight.grad is not None


def test_a_negative_weight_is_refused_naming_the_key():
    """By the reader's config (StepwiseConfig.check), before anything is built."""
    with pytest.raises(UserError, match=r"model\.ctc_aux=-0\.1: must be >= 0"):
        check_experiment(tiny_config("attention", "model.ctc_aux=-0.1"))


def test_the_lab_readers_train_with_it_by_default_and_the_others_do_not():
    for name in registry.names():
        node = registry.config_node(name)
        want = 1.0 if name in ("attention", "fixed") else 0.0
        assert node.get("ctc_aux", 0.0) == want, name


def test_a_checkpoint_from_before_the_auxiliary_loss_reads_as_trained_without_it(tmp_path):
    from attnlab.config import plain_config

    for name in ("attention", "ctc"):
        m, cfg = build(name, *(("model.ctc_aux=0",) if name == "attention" else ()))
        config = plain_config(cfg)
        config["model"].pop("ctc_aux", None)
        path = tmp_path / f"{name}.pt"
        torch.save({"format": 6, "reader": m.name, "model": m.state_dict(), "config": config}, path)
        back, old = checkpoint.load(path).rebuild(path)
        assert "ctc_aux" not in old.model if name == "ctc" else old.model.ctc_aux == 0.0
        assert getattr(back, "ctc_head", None) is None
    # Today's format keeps the weight it was trained with, and the classifier's weights.
    m, cfg = build("attention", "model.ctc_aux=0.7")
    path = tmp_path / "new.pt"
    config = plain_config(cfg)
    torch.save(
        {"format": checkpoint.FORMAT, "reader": m.name, "model": m.state_dict(), "config": config},
        path,
    )
    back, new = checkpoint.load(path).rebuild(path)
    assert new.model.ctc_aux == 0.7 and torch.equal(back.ctc_head.weight, m.ctc_head.weight)
