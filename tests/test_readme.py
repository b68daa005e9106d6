"""The README's commands parse, and the lab figures' markers are read and rewritten right.

Every ``attnlab ...`` line of README.md's code blocks is checked in-process, no subprocess:
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

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

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


def readme_commands(text: str) -> list[str]:
    """Each ``attnlab ...`` command of the fenced shell blocks, continuation lines joined,
    comments dropped."""
    commands, shell, lines = [], False, text.replace("\\\n", " ").splitlines()
    for line in lines:
        if line.startswith("```"):
            shell = not shell and line.strip("`").strip() in ("", "bash", "sh")
            continue
        if shell and line.lstrip().startswith("attnlab "):
            commands.append(shlex.join(shlex.split(line, comments=True)))
    return commands


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


def test_the_readme_has_commands_of_every_kind():
    firsts = {tuple(shlex.split(c)[1:3]) for c in COMMANDS}
    for wanted in [("train",), ("sweep", "lengths"), ("eval",), ("probe",), ("report",)]:
        assert any(f[: len(wanted)] == wanted for f in firsts), wanted
    assert len(COMMANDS) >= 30


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_parses(command):
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


def test_links_into_scripts_readme_name_its_headings():
    """Each ``scripts/README.md#anchor`` the README links to is a heading there (GitHub's
    anchors: lower case, punctuation dropped, spaces as hyphens)."""
    text = (ROOT / "scripts/README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.*)$", text, re.M)
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    links = re.findall(r"scripts/README\.md#([\w\-]+)", README.read_text(encoding="utf-8"))
    assert links and set(links) <= anchors, set(links) - anchors


# --- scripts/lab_figures.py: markers ---------------------------------------------------------


def _lab_figures():
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
    lab = _lab_figures()
    assert lab.read_blocks(TEXT) == {"comparison": "| a | b |\n", "probe": "old probe\n"}


def test_write_replaces_only_the_named_blocks_and_keeps_the_rest():
    lab = _lab_figures()
    new = lab.write_blocks(TEXT, {"probe": "new probe\nsecond line"})
    assert new == TEXT.replace("old probe\n", "new probe\nsecond line\n")
    assert lab.write_blocks(new, {"probe": "new probe\nsecond line"}) == new  # idempotent


def test_check_names_each_figure_that_differs():
    lab = _lab_figures()
    assert lab.stale(TEXT, {"comparison": "| a | b |", "probe": "old probe"}) == []
    assert lab.stale(TEXT, {"comparison": "| a | c |", "probe": "new"}) == ["comparison", "probe"]
    assert lab.stale(TEXT, {"width": "x"}) == ["width"]  # a figure with no block is stale


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
        _lab_figures().read_blocks(text)


def test_writing_a_figure_without_a_block_is_refused():
    with pytest.raises(ValueError, match="lab:width"):
        _lab_figures().write_blocks(TEXT, {"width": "x"})


def test_the_readme_has_a_block_for_every_figure_the_script_makes():
    lab = _lab_figures()
    assert set(lab.read_blocks(README.read_text(encoding="utf-8"))) == set(lab.FIGURES)


def test_check_exits_1_naming_a_stale_figure_and_write_makes_it_current(tmp_path, capsys):
    lab = _lab_figures()
    readme = tmp_path / "README.md"
    readme.write_text(TEXT)
    figs = {"comparison": "| a | b |", "probe": "new"}
    assert lab.sync(readme, figs, write=False, check=True) == 1
    assert capsys.readouterr().err.startswith("lab:probe:")
    assert readme.read_text() == TEXT  # --check writes nothing
    assert lab.sync(readme, figs, write=True, check=False) == 0
    assert readme.read_text() == TEXT.replace("old probe", "new")
    assert lab.sync(readme, figs, write=False, check=True) == 0
