"""The held-out typeface benchmark (attnlab.bench.typefaces): its test strips, and one tiny
benchmark run end to end."""

import json
import os
from pathlib import Path

import pytest

from attnlab.bench import typefaces
from attnlab.config import DataConfig
from attnlab.data.recorded import folder_strips
from attnlab.errors import UserError


@pytest.mark.parametrize("family", list(typefaces.FAMILIES))
def test_every_family_has_fonts_that_draw_ink_in_both_kinds(family, tmp_path):
    fonts = typefaces.family_fonts(family)
    assert fonts, f"{family}: no default training font"
    synthetic = typefaces.synthetic_folder(tmp_path / "synthetic", fonts, 3, [1, 4], seed=1)
    # Whole strings in every font of the family (a display font's placeholder boxes, once
    # listed, made blank test strips).
    whole = typefaces.whole_string_folder(tmp_path / "whole", fonts, 1, [1, 4], seed=1, free=True)
    for kind, folder, n in (("synthetic", synthetic, 3), ("whole-string", whole, len(fonts))):
        strips, _ = folder_strips(folder, DataConfig(), False)  # as drawn: no crop hides a blank
        assert sorted(len(s) for s in strips.labels) == [1] * n + [4] * n
        for i in range(len(strips)):  # no blank strip: ink far darker than the paper
            pixels = strips.images[i, :, : int(strips.widths[i])]
            assert float(pixels.max() - pixels.min()) > 0.4, (kind, i)


def test_free_layout_draws_each_font_with_its_own_margins(tmp_path):
    fonts = typefaces.family_fonts("sans")[:2]
    folder = typefaces.whole_string_folder(tmp_path / "free", fonts, 2, [3], seed=0, free=True)
    names = sorted(p.name for p in folder.glob("*.png"))
    assert len(names) == 4 and all(Path(f).stem in " ".join(names) for f in fonts)


@pytest.fixture
def commands_in_process(monkeypatch, tmp_path):
    """The section's ``attnlab`` commands run by the CLI in this process
    (``helpers.cli.bench_commands``): what a subprocess adds is not what these tests check."""
    from helpers.cli import bench_commands

    monkeypatch.setattr(typefaces, "attnlab", bench_commands("typefaces", tmp_path))


@pytest.mark.slow
def test_several_trainings_per_family_are_read_on_the_same_strips(
    tmp_path, capsys, commands_in_process
):
    # Real trainings (tiny, seconds each) and real evaluations, two seeds of one family.
    out = tmp_path / "bench"
    report = typefaces.main(
        [
            "--families", "sans", "--seeds", "2", "--steps", "10", "--n", "2",
            "--lengths", "1", "2", "--out", str(out), "--json", str(tmp_path / "r.json"),
            "--override", "preset=tiny",
        ]
    )  # fmt: skip
    assert report["seeds"] == [0, 1]
    rows = [(r["kind"], r["seed"], r["n"]) for r in report["rows"]]
    assert sorted(rows) == [(k, s, 4) for k in ("synthetic", "whole-string") for s in (0, 1)]
    for run in ("run", "run-seed1"):
        assert (out / "sans" / run / "eval" / "whole-string" / "readings.csv").is_file()
    printed = capsys.readouterr().out
    assert "mean % (min - max)" in printed and "2 trainings per family, seeds [0, 1]" in printed
    assert len([line for line in printed.splitlines() if line.startswith("overall")]) == 2


def test_the_figures_file_is_written_whole(tmp_path):
    """--json goes through attnlab.io (whole or not at all): its folder is made, an earlier
    file is replaced in one rename (a link to it keeps its bytes), no temporary file is left,
    and a folder in its way is one line. No family: no training, the figures file alone."""
    out = tmp_path / "figures" / "r.json"
    args = ["--families", ",", "--out", str(tmp_path / "bench"), "--json", str(out)]
    first = typefaces.main(args)  # figures/ not there yet
    assert json.loads(out.read_text()) == first
    os.link(out, tmp_path / "kept.json")
    report = typefaces.main([*args, "--steps", "7"])
    assert json.loads(out.read_text()) == report and report["steps"] == 7
    assert json.loads((tmp_path / "kept.json").read_text())["steps"] != 7
    assert sorted(os.listdir(out.parent)) == ["r.json"]
    with pytest.raises(UserError, match="is a directory"):
        typefaces.main([*args[:-1], str(tmp_path / "figures")])
