"""ONNX export (attnlab export, read --onnx, eval --onnx): the parity check, the reference
loop's readings and preprocessing, and the refusal of crafted exports.

Uses the session's trained tiny runs (``trained``); every export is a real one, written by
the CLI or by ``export_run`` and read back by onnxruntime.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from PIL import Image

from attnlab.data import pixels
from attnlab.errors import UserError
from attnlab.export.exporter import export_run
from attnlab.export.sidecar import PARITY, SIDECAR, sha256


@pytest.fixture(scope="module")
def exports(trained, tmp_path_factory, attnlab_run) -> dict[str, Path]:
    """``attnlab export RUN OUT`` of each trained lab reader, through the CLI."""
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for kind in ("attention", "fixed"):
        res = attnlab_run("export", trained[kind], root / kind, cwd=root)
        assert res.returncode == 0, res.stderr
        assert "parity:" in res.stdout and "export written to" in res.stdout
        out[kind] = root / kind
    return out


@pytest.fixture(scope="module")
def strip_files(tmp_path_factory) -> list[Path]:
    """Generated strips of lengths 1-12 as PNG files (as ``attnlab data export`` writes)."""
    import torch
    from helpers.readers import tiny_config

    from attnlab.data.strips import StripSynth
    from attnlab.data.write_strips import export_folder

    root = tmp_path_factory.mktemp("strips")
    synth = StripSynth(tiny_config("attention").data)  # the glyph bank the runs trained on
    export_folder(synth.sample(torch.arange(1, 13), torch.Generator().manual_seed(5)), root)
    return sorted(root.glob("*.png"))


@pytest.mark.parametrize("kind", ["attention", "fixed"])
def test_export_passes_its_parity_check_and_records_its_figures(exports, kind):
    folder = exports[kind]
    meta = json.loads((folder / SIDECAR).read_text())
    figures = json.loads((folder / PARITY).read_text())
    assert figures["passed"] and figures["readings_differ"] == 0
    assert 0 < figures["max_logit_diff"] <= 1e-4  # float rounding differs, never by more
    assert figures["lengths"] == [1, 16]
    cases = [c["case"] for c in figures["by_case"]]
    assert any("batch 1" in c for c in cases) and any("batch 64" in c for c in cases)
    assert any("stretched" in c for c in cases) and any("beam" in c for c in cases)
    assert meta["reader"] == kind and meta["kind"] == "stepwise" and meta["opset"] == 17
    assert meta["weights"] is (kind == "attention")
    for entry in meta["graphs"].values():
        assert sha256((folder / entry["file"]).read_bytes()) == entry["sha256"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [SIDECAR, PARITY, "encoder.onnx", "step.onnx"]
    )


def test_read_onnx_prints_what_read_prints(exports, trained, strip_files, attnlab_run):
    files, cwd = [str(p) for p in strip_files], strip_files[0].parent
    torch_out = attnlab_run("read", "--run", trained["attention"], *files, cwd=cwd)
    maps = ["--attention", cwd / "maps"]
    onnx_out = attnlab_run("read", "--onnx", exports["attention"], *maps, *files, cwd=cwd)
    assert torch_out.returncode == 0 and onnx_out.returncode == 0, onnx_out.stderr
    table = onnx_out.stdout.splitlines()[: len(files) + 1]
    assert table == torch_out.stdout.splitlines() and len(set(table)) == len(files) + 1
    assert len(list((cwd / "maps").glob("*.png"))) == len(files)


def test_read_onnx_of_a_reader_without_weights(exports, trained, strip_files):
    """The fixed reader, through the functions behind ``attnlab read`` (in-process)."""
    from attnlab.tasks.read import read_files, read_files_onnx

    theirs, ours = [], []
    read_files(strip_files, str(trained["fixed"]), None, 1, "best", "cpu", theirs.append)
    read_files_onnx(strip_files, exports["fixed"], strip_files[0].parent, 1, ours.append)
    assert ours[:-1] == theirs and ours[-1].endswith("no attention weights, so no maps are drawn")


@pytest.mark.parametrize("kind", ["attention", "fixed"])
def test_beam_search_of_the_reference_loop_reads_what_torch_reads(
    exports, trained, strip_files, kind
):
    import attnlab
    from attnlab.export.runtime import Export

    theirs = attnlab.load(trained[kind]).read(strip_files, beam=3)
    ours = Export(exports[kind], threads=1).read(strip_files, beam=3)
    assert ours.texts == [r.text for r in theirs]
    assert np.allclose(ours.confidence, [r.confidence for r in theirs], atol=1e-4)


def test_eval_onnx_gives_evals_exact_accuracy_at_every_length(
    exports, trained, copy_run, attnlab_run, tmp_path
):
    from attnlab.config import EvalConfig
    from attnlab.evaluation.evaluate import evaluate_run

    run = copy_run(trained["attention"])
    cfg = EvalConfig(n=6, lengths=[1, 5], n_boot=0, explore_n=0)
    evaluate_run(run, cfg, device="cpu", say=lambda _: None)
    args = ["--n", "6", "eval.lengths=[1,5]", "eval.n_boot=0", "eval.explore_n=0"]
    res = attnlab_run("eval", run, *args, "--onnx", exports["attention"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr

    def exact(name):
        with open(run / "eval" / name / "metrics_by_length.csv", newline="") as f:
            return [(r["length"], r["split"], r["exact_acc"], r["cer"]) for r in csv.DictReader(f)]

    torch_rows, onnx_rows = exact("synthetic-greedy"), exact("synthetic-greedy-onnx")
    assert len(torch_rows) == 5 + 2 and onnx_rows == torch_rows
    meta = json.loads((run / "eval" / "synthetic-greedy-onnx" / "eval.json").read_text())
    assert meta["extra"]["onnx"] == str(exports["attention"])
    assert f"ONNX export {exports['attention']}" in res.stdout


def test_eval_onnx_refuses_an_export_of_another_run(exports, trained, copy_run):
    from attnlab.config import EvalConfig
    from attnlab.evaluation.evaluate import evaluate_run

    run = copy_run(trained["fixed"])
    with pytest.raises(UserError, match="exported from .*; export this run again"):
        evaluate_run(run, EvalConfig(n=2), onnx=str(exports["attention"]), say=lambda _: None)
    assert not (run / "eval").exists()


def test_without_onnxruntime_export_says_which_extra_to_install(trained, tmp_path):
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from attnlab.export.exporter import export_run\n"
        f"export_run({str(trained['fixed'])!r}, {str(tmp_path / 'out')!r})\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "ONNX export needs onnxruntime: pip install 'attnlab[export]'" in res.stderr
    assert not (tmp_path / "out").exists()


def test_the_reference_loop_runs_without_torch(exports, strip_files):
    """A deployment has NumPy, Pillow, onnx and onnxruntime: torch cannot be imported."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from attnlab.export.runtime import Export\n"
        f"files = {[str(p) for p in strip_files]!r}\n"
        f"r = Export({str(exports['attention'])!r}).read(files, beam=2)\n"
        "print(len(r.texts), 'torch' in sys.modules and sys.modules['torch'] is not None)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(len(strip_files)), "False"]


def _images(tmp_path: Path) -> list[Path]:
    """Files that take every branch of the loader: grey, RGB, light ink on dark paper,
    16-bit, alpha, a tall margin."""
    rng = np.random.default_rng(0)
    base = np.full((40, 120), 230, np.uint8)
    base[12:30, 10:110:12] = 20  # ink columns
    base = np.clip(base + rng.integers(-8, 8, base.shape), 0, 255).astype(np.uint8)
    made = {
        "grey.png": Image.fromarray(base),
        "rgb.jpg": Image.fromarray(np.stack([base, base // 2 + 60, base], -1)),
        "inverted.png": Image.fromarray(255 - base),
        "deep.png": Image.fromarray(base.astype(np.uint16) * 16).convert("I;16"),
        "alpha.png": Image.fromarray(np.stack([base] * 3 + [np.full_like(base, 200)], -1)),
        "margin.png": Image.fromarray(np.pad(base, ((30, 5), (0, 40)), constant_values=230)),
    }
    paths = []
    for name, im in made.items():
        im.save(tmp_path / name)
        paths.append(tmp_path / name)
    return paths


@pytest.mark.parametrize("crop", [True, False])
def test_numpy_preprocessing_gives_the_folder_loaders_pixels(tmp_path, crop):
    from attnlab.data.folder import load_image

    for path in _images(tmp_path):
        ours = pixels.load_image(path, 32, crop=crop)
        theirs = load_image(path, 32, warn=lambda _: None, crop=crop).numpy()
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs), path.name


# --- refusals -------------------------------------------------------------------------------


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / "crafted"))


def _set_graph(folder: Path, name: str, model: onnx.ModelProto) -> None:
    """Write a graph and give the sidecar its sha256, so only the graph check can refuse it."""
    data = model.SerializeToString()
    (folder / f"{name}.onnx").write_bytes(data)
    meta = json.loads((folder / SIDECAR).read_text())
    meta["graphs"][name]["sha256"] = sha256(data)
    (folder / SIDECAR).write_text(json.dumps(meta))


def _edit_meta(folder: Path, edit) -> None:
    meta = json.loads((folder / SIDECAR).read_text())
    edit(meta)
    (folder / SIDECAR).write_text(json.dumps(meta))


def _custom_domain(folder: Path) -> None:
    model = onnx.load(folder / "step.onnx")
    node = model.graph.node[0]
    node.domain = "evil.ops"
    model.opset_import.append(onnx.helper.make_opsetid("evil.ops", 1))
    _set_graph(folder, "step", model)


def _renamed_input(folder: Path) -> None:
    model = onnx.load(folder / "encoder.onnx")
    old = model.graph.input[0].name
    model.graph.input[0].name = "pixels"
    for node in model.graph.node:
        node.input[:] = ["pixels" if i == old else i for i in node.input]
    _set_graph(folder, "encoder", model)


def _extra_output(folder: Path) -> None:
    model = onnx.load(folder / "step.onnx")
    model.graph.output.append(model.graph.output[0])
    _set_graph(folder, "step", model)


CRAFTED = {
    "graph bytes changed": (
        lambda f: (f / "step.onnx").write_bytes((f / "step.onnx").read_bytes() + b"\0"),
        "sha256 does not match",
    ),
    "unknown key": (lambda f: _edit_meta(f, lambda m: m.update(run_me="x")), "unknown key"),
    "bad type": (lambda f: _edit_meta(f, lambda m: m.update(height="32")), "height must be"),
    "path in file": (
        lambda f: _edit_meta(f, lambda m: m["graphs"]["step"].update(file="../x.onnx")),
        "file must be step.onnx",
    ),
    "not JSON": (lambda f: (f / SIDECAR).write_text("{'a': 1"), "not valid JSON"),
    "not a graph": (lambda f: _set_graph_bytes(f, b"\x08\x07garbage"), "not an ONNX model"),
    "custom op domain": (_custom_domain, "evil.ops"),
    "renamed input": (_renamed_input, "the graph takes"),
    "extra output": (_extra_output, "the graph takes"),
}


def _set_graph_bytes(folder: Path, data: bytes) -> None:
    (folder / "encoder.onnx").write_bytes(data)
    _edit_meta(folder, lambda m: m["graphs"]["encoder"].update(sha256=sha256(data)))


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_export_is_refused_in_one_line_before_onnxruntime_loads_it(
    exports, tmp_path, monkeypatch, case
):
    import onnxruntime

    from attnlab.export.runtime import Export

    craft, words = CRAFTED[case]
    folder = _copy(exports["attention"], tmp_path)
    craft(folder)
    loaded = []
    real = onnxruntime.InferenceSession
    spy = lambda *a, **k: loaded.append(1) or real(*a, **k)  # noqa: E731
    monkeypatch.setattr(onnxruntime, "InferenceSession", spy)
    with pytest.raises(UserError, match=words) as err:
        Export(folder)
    assert "\n" not in str(err.value)
    # encoder.onnx is checked and loaded before step.onnx; a refused graph never is loaded
    step_cases = ("graph bytes changed", "custom op domain", "extra output")
    assert len(loaded) == (1 if case in step_cases else 0)


def test_the_cli_refuses_a_crafted_export_with_exit_2(exports, strip_files, attnlab_run, tmp_path):
    folder = _copy(exports["attention"], tmp_path)
    _custom_domain(folder)
    res = attnlab_run("read", "--onnx", folder, strip_files[0], cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("attnlab: error:") and "evil.ops" in res.stderr
    assert res.stdout == ""


# --- the check refuses, and leaves nothing ----------------------------------------------------


def _corrupt_a_weight(folder: Path) -> None:
    """The documented test hook (``export_run(before_check=...)``): one weight of the step
    graph moved, and the sidecar updated, so that only the parity check can catch it."""
    model = onnx.load(folder / "step.onnx")
    weight = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    values = onnx.numpy_helper.to_array(weight).copy()
    values.flat[0] += 0.5
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    _set_graph(folder, "step", model)


def test_a_failing_parity_check_refuses_the_export_and_leaves_nothing(trained, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(UserError, match=r"^parity check failed, nothing written: .* case '"):
        export_run(
            trained["attention"], out, say=lambda _: None, before_check=_corrupt_a_weight,
            per_length=2,
        )  # fmt: skip
    assert not out.exists() and not list(tmp_path.iterdir())


def test_atol_zero_truly_fails_and_leaves_nothing(exports, trained, tmp_path):
    figures = json.loads((exports["fixed"] / PARITY).read_text())
    assert figures["max_logit_diff"] > 0  # so that atol 0 truly fails
    with pytest.raises(UserError, match=r"logits differ by .* worst at strip"):
        export_run(trained["fixed"], tmp_path / "out", atol=0.0, say=lambda _: None, per_length=2)
    assert not list(tmp_path.iterdir())


def test_export_refuses_a_folder_that_is_not_an_export_and_an_unknown_format(trained, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="is not an attnlab export"):
        export_run(trained["fixed"], tmp_path / "mine", say=lambda _: None)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    with pytest.raises(UserError, match="--format tflite"):
        export_run(trained["fixed"], tmp_path / "x", "tflite", say=lambda _: None)
    assert not (tmp_path / "x").exists()
