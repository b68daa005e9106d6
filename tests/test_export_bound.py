"""ONNX export: an export is tied to its run. Each graph's ONNX metadata holds its
checkpoint's sha256, reader, kind, charset, height and stride; the reference loop compares
them with the sidecar (and the scores' class axis with the charset) and refuses, in one line,
what does not belong together. Failures of onnxruntime while reading, and a sidecar nested
too deeply, are one line too.

Real exports of the session's trained attention run (its best and its last checkpoint, two
sets of weights for one architecture), edited as a user or a forger would edit them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.exports import (
    copy_export,
    edit_sidecar,
    export_checkpoint,
    export_reader,
    forge_metadata,
    put_graph,
)
from helpers.readers import tiny_config

from attnlab.errors import UserError
from attnlab.export.runtime import Export
from attnlab.export.sidecar import SIDECAR
from attnlab.models import registry


@pytest.fixture(scope="module")
def two(trained, tmp_path_factory) -> dict[str, object]:
    """Exports of the trained attention run's best and last checkpoints (the exporter's
    graphs and sidecar, no parity check), a copy of that run, and a strip file to read."""
    import shutil

    from PIL import Image

    root = tmp_path_factory.mktemp("bound")
    run = Path(shutil.copytree(trained["attention"], root / "run", ignore=_lock))
    out = {"run": run, "root": root}
    for which in ("best", "last"):
        out[which] = export_checkpoint(run, which, root / which)
    strip = torch.ones(32, 90)
    strip[8:24, 10:80:9] = 0.0
    Image.fromarray((strip.numpy() * 255).astype("uint8")).save(root / "strip.png")
    out["strip"] = root / "strip.png"
    return out


def _lock(folder, names):
    return [n for n in names if n == ".lock"]


def _refused(folder: Path, strip: Path, words: str) -> None:
    with pytest.raises(UserError, match=words) as err:
        Export(folder, threads=1).read([strip])
    assert "\n" not in str(err.value)


def test_the_two_checkpoints_differ_so_the_swap_below_is_a_real_one(two):
    best, last = (json.loads((two[w] / SIDECAR).read_text())["source"] for w in ("best", "last"))
    assert best["checkpoint_sha256"] != last["checkpoint_sha256"]
    assert (two["best"] / "step.onnx").read_bytes() != (two["last"] / "step.onnx").read_bytes()


@pytest.mark.parametrize("graphs", [["encoder", "step"], ["step"], ["encoder"]])
def test_graphs_of_another_checkpoint_are_refused_with_their_sha256_recomputed(
    two, tmp_path, graphs
):
    """Both graphs copied (another run's export under this sidecar), or one of them (graphs of
    two runs mixed): the sidecar's sha256 is right, the graphs' digest is another's."""
    folder = copy_export(two["best"], tmp_path / "x")
    for name in graphs:
        put_graph(folder, name, (two["last"] / f"{name}.onnx").read_bytes())
    words = f"{graphs[0]}.onnx: was exported from checkpoint .*another run's"
    _refused(folder, two["strip"], words)


EDITS = {
    "permuted charset": ("charset", "1023456789"),
    "shortened charset": ("charset", "012345678"),
    "16-character charset": ("charset", "0123456789ABCDEF"),
    "stride": ("stride", 7),
    "height 64": ("height", 64),
    "height 4096": ("height", 4096),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_edited_sidecar_is_refused_naming_the_key(two, tmp_path, case):
    key, value = EDITS[case]
    folder = copy_export(two["best"], tmp_path / "x")
    edit_sidecar(folder, lambda m: m.update({key: value}))
    _refused(folder, two["strip"], f"encoder.onnx: was exported with {key} .*, {SIDECAR} says")


def test_the_cli_refuses_an_edited_sidecar_in_one_line_exit_2(two, tmp_path, attnlab_cli):
    folder = copy_export(two["best"], tmp_path / "x")
    edit_sidecar(folder, lambda m: m.update(height=64))
    res = attnlab_cli("read", "--onnx", folder, two["strip"], cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "was exported with height" in res.stderr and res.stdout == ""


def test_a_stride_edit_draws_no_misplaced_maps(two, tmp_path, attnlab_run):
    folder = copy_export(two["best"], tmp_path / "x")
    edit_sidecar(folder, lambda m: m.update(stride=m["stride"] * 2))
    res = attnlab_run("read", "--onnx", folder, "--attention", "maps", two["strip"], cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "was exported with stride" in res.stderr and not (tmp_path / "maps").exists()


def _sixteen(tmp_path):
    """An export of a 16-character reader (same architecture, a wider vocabulary)."""
    charset = "0123456789ABCDEF"
    cfg = tiny_config("attention", f"data.charset={charset}")
    torch.manual_seed(0)
    reader = registry.build(cfg.model, cfg.data.height, charset).eval()
    return export_reader(reader, cfg, tmp_path / "sixteen", digest="1" * 64)


def test_a_16_character_runs_graphs_under_a_10_digit_sidecar_are_refused(two, tmp_path):
    sixteen = _sixteen(tmp_path)
    folder = copy_export(two["best"], tmp_path / "x")
    for name in ("encoder", "step"):
        put_graph(folder, name, (sixteen / f"{name}.onnx").read_bytes())
    _refused(folder, two["strip"], "was exported from checkpoint 111111111111")
    # with the 10-digit export's metadata forged in, the logits' width still gives it away
    for name in ("encoder", "step"):
        forge_metadata(folder, name, two["best"])
    _refused(folder, two["strip"], "step.onnx: logits has 19 classes, the charset .* gives 13")


def test_an_onnxruntime_failure_while_reading_is_one_line_exit_2(two, tmp_path, attnlab_run):
    """Graphs of a reader of height 48, passed off as the export's (metadata forged): they
    load, and onnxruntime fails on the first strip."""
    cfg = tiny_config("attention", "data.height=48")
    torch.manual_seed(0)
    other = export_reader(registry.build(cfg.model, 48), cfg, tmp_path / "h48")
    folder = copy_export(two["best"], tmp_path / "x")
    for name in ("encoder", "step"):
        put_graph(folder, name, (other / f"{name}.onnx").read_bytes())
        forge_metadata(folder, name, two["best"])
    res = attnlab_run("read", "--onnx", folder, two["strip"], cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("attnlab: error: ") and res.stdout == ""
    assert "encoder.onnx: onnxruntime failed while reading: [ONNXRuntimeError]" in res.stderr


@pytest.mark.parametrize("depth", [50, 100_000])
def test_a_deeply_nested_sidecar_is_one_line(two, tmp_path, attnlab_run, depth):
    folder = copy_export(two["best"], tmp_path / "x")
    text = (folder / SIDECAR).read_text()
    nested = "[" * depth + "]" * depth
    (folder / SIDECAR).write_text(text.replace('"memory": [', f'"memory": [{nested}, ', 1))
    res = attnlab_run("read", "--onnx", folder, two["strip"], cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "nested" in res.stderr and "RecursionError" not in res.stderr


def test_eval_onnx_refuses_another_checkpoints_graphs_under_the_runs_sidecar(two, tmp_path):
    """The sidecar names RUN's checkpoint (it is RUN's own), the graphs are another's: the
    export does not prove it is RUN's, so nothing is evaluated."""
    from attnlab.config import EvalConfig
    from attnlab.evaluation.evaluate import evaluate_run

    folder = copy_export(two["best"], tmp_path / "x")
    for name in ("encoder", "step"):
        put_graph(folder, name, (two["last"] / f"{name}.onnx").read_bytes())
    with pytest.raises(UserError, match="was exported from checkpoint"):
        evaluate_run(two["run"], EvalConfig(n=2), onnx=str(folder), say=lambda _: None)
    assert not (two["run"] / "eval").exists()
    # an export of the run's last checkpoint is not one of the best checkpoint it evaluates
    with pytest.raises(UserError, match="not from .*best.pt; export this run again"):
        evaluate_run(two["run"], EvalConfig(n=2), onnx=str(two["last"]), say=lambda _: None)


def test_an_export_of_a_checkpoint_changed_since_names_its_path_once(two, tmp_path, attnlab_run):
    """A run exported, then trained on (its best.pt replaced): ``eval --onnx`` says the
    checkpoint changed since the export, naming it once, not "exported from X, not from X"."""
    import shutil

    run = Path(shutil.copytree(two["run"], tmp_path / "run", ignore=_lock))
    folder = export_checkpoint(run, "best", tmp_path / "exp")
    best = run / "checkpoints" / "best.pt"
    shutil.copyfile(run / "checkpoints" / "last.pt", best)  # as training on would replace it
    res = attnlab_run("eval", run, "--onnx", folder, "eval.n=2", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.count(str(best)) == 1, res.stderr
    assert "which has changed since (now sha256" in res.stderr
    assert "export this run again" in res.stderr
    assert not (run / "eval").exists()
