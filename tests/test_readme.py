"""The README's and the docs pages' commands parse, their links resolve, and the lab figures'
markers are read and rewritten right.

Every ``attnlab ...`` line of the code blocks of README.md and of every docs/*.md page is
checked in-process, no subprocess:
its words and options against the real Typer app (click's ``make_context``), then, for the
commands that forward to Hydra, its overrides composed as the task would compose them
(``attnlab.tasks.compose``, ``--cfg job`` semantics: nothing runs), every value of a swept
key once. An unknown key, option or group fails. Placeholders (RUN, P, OUT, <date>) stand
where the README uses them: no path is opened.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest
import typer
from helpers.pages import readme_commands

from attnlab.maintain import labdoc, labfigures

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LAB = ROOT / "docs" / "lab.md"
# every page whose commands are parsed and whose links are followed: the README, then docs/
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

# Typer command path -> the Hydra config its task composes, and the override its RUN becomes
TASKS = {
    ("train",): ("train", None),
    ("sweep", "lengths"): ("sweep", None),
    ("eval",): ("evaluate", "run"),
    ("probe",): ("probe", "run"),
    ("data", "preview"): ("strips", None),
    ("data", "export"): ("strips", None),
}
HYDRA_FLAGS = {"-m", "--multirun"}  # flags a forwarding command passes on to Hydra
HYDRA_VALUED = {"--cfg", "-c"}


def _typer_context(words: list[str]):
    """The command path and its parsed context (None for the app's own options); raises
    on an unknown command or option, as the CLI would."""
    from attnlab.cli import app

    cmd = typer.main.get_command(app)
    path: list[str] = []
    args = list(words)
    while hasattr(cmd, "commands"):  # a group: the next word names a subcommand
        if args and args[0].startswith("-"):
            cmd.make_context("attnlab", args, resilient_parsing=True)
            return tuple(path), None
        name = args.pop(0)
        if name not in cmd.commands:
            raise ValueError(f"no such command {' '.join(['attnlab', *path, name])!r}")
        path.append(name)
        cmd = cmd.commands[name]
    # resilient parsing leaves placeholders (--n N) unconverted, and passes over an unknown
    # option: those are named here, against the command's own options and Hydra's flags
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    if cmd.context_settings.get("allow_extra_args"):
        known |= HYDRA_FLAGS | HYDRA_VALUED
    for word in args:
        if word.startswith("-") and word.split("=", 1)[0] not in known:
            raise ValueError(f"attnlab {' '.join(path)}: no such option: {word}")
    ctx = cmd.make_context(" ".join(["attnlab", *path]), args, resilient_parsing=True)
    if ctx.args and not cmd.context_settings.get("allow_extra_args"):
        raise ValueError(f"attnlab {' '.join(path)}: unexpected {ctx.args}")
    return tuple(path), ctx


def _hydra_overrides(args: list[str]) -> list[str]:
    """The overrides among a forwarding command's extra args; an option Hydra does not know
    (a misspelt Typer option lands here) fails."""
    out, rest = [], list(args)
    while rest:
        arg = rest.pop(0)
        if arg in HYDRA_FLAGS:
            continue
        if arg in HYDRA_VALUED:
            rest.pop(0)
            continue
        if arg.startswith("-"):
            raise ValueError(f"no such option: {arg}")
        out.append(arg)
    return out


def _readers_axis(override: str) -> str:
    """``readers=all|a,b`` as the CLI turns it into the model axis."""
    from attnlab.models import registry

    wanted = override.split("=", 1)[1]
    return "model=" + ",".join(registry.names() if wanted == "all" else wanted.split(","))


def _each_value(overrides: list[str]) -> list[list[str]]:
    """One override list per value of each swept key (the others at their first value), as
    a multirun's jobs would compose them; an interval (a sweeper's search space) at its
    start."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    parsed = OverridesParser.create().parse_overrides(overrides)
    firsts, choices = [], []
    for text, o in zip(overrides, parsed, strict=True):
        key = text.split("=", 1)[0]
        if isinstance(o.value(), IntervalSweep):
            values = [str(o.value().start)]
        elif o.is_sweep_override():
            values = list(o.sweep_string_iterator())
        else:
            values = [o.get_value_element_as_str()] if o.value() is not None else ["null"]
        firsts.append(f"{key}={values[0]}")
        choices.append([f"{key}={v}" for v in values])
    runs = [firsts]
    for i, options in enumerate(choices):
        runs += [firsts[:i] + [alt] + firsts[i + 1 :] for alt in options[1:]]
    return runs


def check_command(command: str) -> None:
    """Parse ``command`` as the CLI would; compose its Hydra config if it forwards to one
    (inside the ``hydra`` fixture's initialised config module)."""
    from hydra import compose

    path, ctx = _typer_context(shlex.split(command)[1:])
    if path not in TASKS or ctx is None:
        return
    config_name, run_key = TASKS[path]
    overrides = _hydra_overrides(ctx.args)
    overrides = [_readers_axis(o) if o.startswith("readers=") else o for o in overrides]
    if run_key:
        overrides.insert(0, f"{run_key}=RUN")
    for job in _each_value(overrides):
        compose(config_name, job, return_hydra_config=True)


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))
PAGE_COMMANDS = [
    pytest.param(c, id=f"{page.relative_to(ROOT)}: {c}")
    for page in PAGES
    for c in readme_commands(page.read_text(encoding="utf-8"))
]


@pytest.fixture(scope="module", autouse=True)
def hydra():
    """Hydra initialised once on attnlab.conf, every reader's schema registered, as
    attnlab.tasks.compose does for each call (here once: hundreds of composes)."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from attnlab.models import registry

    registry.discover()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="attnlab.conf", version_base="1.3"):
        yield


def test_the_pages_have_commands_of_every_kind():
    assert [p.name for p in PAGES] == ["README.md", "install.md", "lab.md", "own-strips.md"]
    commands = [p.values[0] for p in PAGE_COMMANDS]
    firsts = {tuple(shlex.split(c)[1:3]) for c in commands}
    wanted = [("train",), ("sweep", "lengths"), ("sweep", "tuned"), ("eval",), ("probe",)]
    for want in [*wanted, ("report",), ("cost",), ("read",)]:
        assert any(f[: len(want)] == want for f in firsts), want
    assert len(COMMANDS) >= 15 and len(commands) >= 35
    for page in ("lab.md", "own-strips.md"):  # each docs page with commands has them parsed
        assert any(f"docs/{page}: " in p.id for p in PAGE_COMMANDS), page


@pytest.mark.parametrize("command", PAGE_COMMANDS)
def test_page_command_parses(command):
    check_command(command)


@pytest.mark.parametrize(
    "command, error",
    [
        ("attnlab trian", "no such command"),
        ("attnlab report multirun --comapre a b", "--comapre"),
        ("attnlab eval RUN --bem 4", "--bem"),
        ("attnlab train model=fixd", "fixd"),
        ("attnlab sweep lengths model=fixed 'model.hiden=16,64' seed=0,1", "hiden"),
        ("attnlab probe RUN probe.nn=3", "nn"),
        ("attnlab data preview preview.count=12", "count"),
        ("attnlab sweep lengths 'model.pos=sinusoidal,learned'", "pos"),  # an attention key?
    ],
)
def test_an_unknown_command_key_option_or_group_fails(command, error):
    with pytest.raises(Exception, match=re.escape(error)):
        check_command(command)


def test_a_reader_key_is_known_to_its_reader_only():
    check_command("attnlab train model=transformer model.pos=learned")
    with pytest.raises(Exception, match="pos"):
        check_command("attnlab train model=fixed model.pos=learned")


def test_continuation_lines_and_comments_are_joined():
    text = "```bash\nattnlab sweep lengths seed=0 \\\n    model=fixed   # a comment\nls\n```\n"
    assert readme_commands(text) == ["attnlab sweep lengths seed=0 model=fixed"]


def anchors(page: Path) -> set[str]:
    """A Markdown page's heading anchors as GitHub makes them: lower case, punctuation
    dropped, spaces as hyphens (headings inside code blocks are not headings)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    headings = re.findall(r"^#+ (.*)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[tuple[Path, str]]:
    """Each relative link ``[text](path#anchor)`` of a page: the file it names, resolved
    from the page's folder, and its anchor ("" when none)."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http(s):, mailto:
        path, _, anchor = target.partition("#")
        out.append(((page.parent / path).resolve() if path else page, anchor))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_names_a_file_and_a_heading_there(page):
    """README -> docs/, docs/ -> scripts/README.md, the code: each file exists and each
    ``#anchor`` is a heading of the page it names."""
    found = links(page)
    assert found
    bad = [
        (str(path), anchor)
        for path, anchor in found
        if not path.exists() or (anchor and anchor not in anchors(path))
    ]
    assert not bad, bad


def test_the_readme_links_every_docs_page_and_the_labs_nine_steps():
    targets = {(path, anchor) for path, anchor in links(README)}
    for page in PAGES[1:]:
        assert any(path == page for path, _ in targets), page.name
    steps = sorted(a for path, a in targets if path == LAB and re.match(r"\d-", a))
    assert [a[0] for a in steps] == [str(n) for n in range(1, 10)]
    assert set(steps) <= anchors(LAB)


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## 1. The step: one?\n")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/a.md#1-the-step-one) [no](docs/b.md) [x](docs/a.md#2-nope)\n")
    found = links(page)
    assert [(p.name, a) for p, a in found] == [
        ("a.md", "1-the-step-one"),
        ("b.md", ""),
        ("a.md", "2-nope"),
    ]
    assert [p.exists() and (not a or a in anchors(p)) for p, a in found] == [True, False, False]


def test_the_readme_is_at_most_300_lines_and_names_your_own_strips_once():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert len(re.findall(r"^#+ .*own strips", text, re.M | re.I)) == 1
    assert "```python\nimport json" not in text  # the ONNX consumer is scripts/read_onnx.py


def test_the_two_commands_block_is_two_commands():
    """Pasted whole, the block runs the sweep once: two lines, the sweep and the report (the
    block once read as four: make demo, which runs both, then both again)."""
    section = README.read_text(encoding="utf-8").split("## Two commands\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    block = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)[-1]  # after the install
    lines = [ln.split("#")[0].split() for ln in block.splitlines()]
    assert [ln[:3] for ln in lines] == [["attnlab", "sweep", "lengths"], ["attnlab", "report"]]


# --- the lab figures' markers (attnlab.maintain.labdoc) and scripts/lab_figures.py ----------------


def _script():
    spec = importlib.util.spec_from_file_location("lab_figures", ROOT / "scripts/lab_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("lab_figures", module)
    spec.loader.exec_module(module)
    return module


TEXT = """# Title
<!-- lab:comparison -->
| a | b |
<!-- /lab -->
between
<!-- lab:probe -->
old probe
<!-- /lab -->
end
"""


def test_blocks_are_read_by_name():
    assert labdoc.read_blocks(TEXT) == {"comparison": "| a | b |\n", "probe": "old probe\n"}


def test_write_replaces_only_the_named_blocks_and_keeps_the_rest():
    new = labdoc.write_blocks(TEXT, {"probe": "new probe\nsecond line"})
    assert new == TEXT.replace("old probe\n", "new probe\nsecond line\n")
    assert labdoc.write_blocks(new, {"probe": "new probe\nsecond line"}) == new  # idempotent


def test_check_names_each_figure_that_differs():
    assert labdoc.stale(TEXT, {"comparison": "| a | b |", "probe": "old probe"}) == []
    assert labdoc.stale(TEXT, {"comparison": "| a | c |", "probe": "new"}) == [
        "comparison",
        "probe",
    ]
    assert labdoc.stale(TEXT, {"width": "x"}) == ["width"]  # a figure with no block is stale


@pytest.mark.parametrize(
    "text, error",
    [
        (TEXT + "<!-- lab:probe -->\nx\n<!-- /lab -->\n", "used twice"),
        ("<!-- lab:width -->\nno end\n", "without"),
        ("<!-- lab:a -->\n<!-- lab:b -->\nx\n<!-- /lab -->\n", "before the next marker"),
    ],
)
def test_malformed_markers_are_refused(text, error):
    with pytest.raises(ValueError, match=error):
        labdoc.read_blocks(text)


def test_writing_a_figure_without_a_block_is_refused():
    with pytest.raises(ValueError, match="lab:width"):
        labdoc.write_blocks(TEXT, {"width": "x"})


def test_the_handout_has_a_block_for_every_figure_and_the_readme_none():
    assert set(labdoc.read_blocks(LAB.read_text(encoding="utf-8"))) == set(labfigures.FIGURES)
    assert labdoc.read_blocks(README.read_text(encoding="utf-8")) == {}


def test_check_exits_1_naming_a_stale_figure_and_write_makes_it_current(tmp_path, capsys):
    doc = tmp_path / "lab.md"
    doc.write_text(TEXT)
    figs = {"comparison": "| a | b |", "probe": "new"}
    assert labdoc.sync(doc, figs, write=False, check=True) == 1
    assert capsys.readouterr().err.startswith("lab:probe:")
    assert doc.read_text() == TEXT  # --check writes nothing
    assert labdoc.sync(doc, figs, write=True, check=False) == 0
    assert doc.read_text() == TEXT.replace("old probe", "new")
    assert labdoc.sync(doc, figs, write=False, check=True) == 0


def test_the_scripts_check_reads_docs_lab_md(tmp_path, monkeypatch, capsys):
    """``scripts/lab_figures.py OUT --check`` with no --doc checks docs/lab.md: its own
    blocks pass (exit 0); one figure changed fails (exit 1), naming the figure and the page.
    The runs and figures are stood in for: nothing trains."""
    script = _script()
    blocks = labdoc.read_blocks(LAB.read_text(encoding="utf-8"))
    monkeypatch.setattr(script, "run_all", lambda out, budget, say: {})
    monkeypatch.setattr(script, "figures", lambda out: dict(blocks))
    assert script.HANDOUT == LAB
    assert script.main([str(tmp_path), "--check"]) == 0
    monkeypatch.setattr(script, "figures", lambda out: {**blocks, "width": "other"})
    assert script.main([str(tmp_path), "--check"]) == 1
    assert capsys.readouterr().err == f"lab:width: {LAB}'s figure differs from the runs'\n"
