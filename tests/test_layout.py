"""The house rules that code review would otherwise have to remember: no function in
attnlab/ over 80 lines and no module over 400; no test module importing another test
module; one owner for each step of training (the config checked once per command, and a
trainer never patched by whoever built it)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "attnlab"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400


def _sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def too_long(root: Path) -> list[str]:
    """Every module under ``root`` over MAX_MODULE_LINES lines, every function over
    MAX_FUNCTION_LINES (its decorators and docstring included), as "path:line name (n)"."""
    found = []
    for path in _sources(root):
        text = path.read_text()
        where = path.relative_to(root.parent)
        if text.count("\n") > MAX_MODULE_LINES:
            found.append(f"{where}: module of {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = node.end_lineno - first + 1
                if n > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_function_over_80_lines_and_no_module_over_400():
    assert too_long(PACKAGE) == []


def test_the_size_guard_names_what_is_too_long(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (pkg / "long.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    (pkg / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (pkg / "fine.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert too_long(pkg) == [
        f"pkg/big.py: module of {MAX_MODULE_LINES + 1} lines",
        f"pkg/long.py:5 long ({MAX_FUNCTION_LINES + 1} lines)",
    ]


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (tests/test_*.py) that ``path`` imports, by module name."""
    names = {p.stem for p in path.parent.glob("test_*.py")}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            modules = [base] if base else [alias.name for alias in node.names]
            if base in ("", "tests"):  # from . import test_x; from tests import test_x
                modules += [alias.name for alias in node.names]
        else:
            continue
        found += [m for m in modules if m.split(".")[-1] in names]
    return sorted(set(found))


def test_no_test_module_imports_another_test_module():
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    assert len(tests) > 10
    offenders = {p.name: imported_test_modules(p) for p in tests if imported_test_modules(p)}
    assert offenders == {}


def test_the_import_guard_names_a_test_module_imported(tmp_path):
    (tmp_path / "test_a.py").write_text("def helper():\n    pass\n")
    (tmp_path / "test_b.py").write_text("from test_a import helper\n")
    (tmp_path / "test_c.py").write_text("from tests.test_a import helper\nimport run_helpers\n")
    (tmp_path / "test_d.py").write_text("from . import test_a\nimport tests.test_b\n")
    assert imported_test_modules(tmp_path / "test_b.py") == ["test_a"]
    assert imported_test_modules(tmp_path / "test_c.py") == ["tests.test_a"]
    assert imported_test_modules(tmp_path / "test_d.py") == ["test_a", "tests.test_b"]
    assert imported_test_modules(tmp_path / "test_a.py") == []


# --- one owner for each step of training --------------------------------------------------


@pytest.fixture(scope="module")
def watched_training(tmp_path_factory) -> dict:
    """``attnlab train preset=tiny train.steps=2`` in this process (the session's own
    ``train``), counting the config checks and the reader's builds (meta device or not), then
    the same run resumed to ``train.steps=4``; recording every attribute of a trainer set by
    code outside attnlab/training/trainer.py, while it is built (a resume) or after."""
    import torch

    from attnlab.models import registry
    from attnlab.tasks.compose import compose
    from attnlab.training import prepare, session
    from attnlab.training.trainer import Trainer

    seen: dict = {"checks": 0, "builds": [], "outside": []}
    check_training, build = prepare.check_training, registry.build

    def counted_check(cfg):
        seen["checks"] += 1
        return check_training(cfg)

    def counted_build(*args, **kwargs):
        reader = build(*args, **kwargs)
        seen["builds"].append(next(reader.parameters()).device.type)
        return reader

    own = Path(sys.modules[Trainer.__module__].__file__).resolve()

    class Watched(Trainer):
        def __setattr__(self, name, value):
            code = sys._getframe(1).f_code  # whoever assigns: the trainer's own module only
            if Path(code.co_filename).resolve() != own:
                where = f"{Path(code.co_filename).name}:{code.co_name}"
                seen["outside"].append(f"{name} (set in {where})")
            super().__setattr__(name, value)

    cfg_args = ["preset=tiny", "train.steps=2", "train.threads=1", "train.progress=plain"]
    cfg = compose(cfg_args)
    run = tmp_path_factory.mktemp("house") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(prepare, "check_training", counted_check)
        mp.setattr(session, "check_training", counted_check)
        mp.setattr("attnlab.training.trainer.check_training", counted_check)
        mp.setattr(registry, "build", counted_build)
        mp.setattr(session, "Trainer", Watched)
        threads = torch.get_num_threads()
        try:
            seen["metrics"] = session.train(cfg, run)
            seen["first"] = {"checks": seen["checks"], "builds": list(seen["builds"])}
            more = compose([a.replace("steps=2", "steps=4") for a in cfg_args])
            seen["resumed"] = session.train(more, run)  # last.pt restored into the trainer
        finally:
            torch.set_num_threads(threads)
    seen["run"] = run
    return seen


def test_a_training_command_checks_its_config_once(watched_training):
    assert watched_training["metrics"]["step"] == 2  # it trained, to its end
    assert (watched_training["run"] / "metrics.json").is_file()
    assert watched_training["first"]["checks"] == 1
    # the reader: once on the meta device for its size, once to train
    builds = watched_training["first"]["builds"]
    assert len(builds) == 2 and builds[0] == "meta" and builds[1] != "meta", builds


def test_nobody_patches_a_trainer_once_built(watched_training):
    assert watched_training["metrics"]["step"] == 2
    assert watched_training["resumed"]["step"] == 4  # built from last.pt, then trained on
    assert watched_training["outside"] == []


def assigned_trainers(paths: list[Path], root: Path) -> list[str]:
    """Every assignment to an attribute of a trainer in ``paths``: of a name bound to
    ``Trainer(...)``, or of a parameter that is one (annotated ``Trainer`` or named
    ``trainer``), by ``=``, ``+=``, an annotated assignment or ``setattr``."""
    found = []
    for path in paths:
        for fn in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            built = {
                a.arg
                for a in params
                if a.arg == "trainer" or "Trainer" in ast.unparse(a.annotation or ast.Constant(""))
            }
            built |= {
                t.id
                for node in ast.walk(fn)
                if isinstance(node, ast.Assign) and _calls(node.value, "Trainer")
                for t in node.targets
                if isinstance(t, ast.Name)
            }
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                    targets = [node.target]
                if _calls(node, "setattr") and node.args:
                    targets = [ast.Attribute(node.args[0], "?", lineno=node.lineno)]
                for t in targets:
                    if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) in built:
                        found.append(f"{path.relative_to(root)}:{t.lineno} {t.value.id}.{t.attr}")
    return found


def test_no_module_assigns_to_a_trainer():
    """Across attnlab/ and scripts/: nobody assigns a trainer's attributes but the trainer
    (what it needs goes to its constructor; what it changes is its ``state``)."""
    assert assigned_trainers(_sources(PACKAGE) + _sources(ROOT / "scripts"), ROOT) == []


def test_the_trainer_guard_names_an_assignment_from_outside(tmp_path):
    (tmp_path / "pkg").mkdir()
    code = (
        "def resume(trainer, step):\n    trainer.step = step\n\n"
        "def load(t: 'Trainer', h):\n    t.history += h\n    setattr(t, 'best', None)\n\n"
        "def run(cfg):\n    tr = Trainer(cfg)\n    tr.writer: int = 3\n    t = cfg.train\n"
        "    t.steps = 4\n"
    )
    (tmp_path / "pkg" / "m.py").write_text(code)
    found = assigned_trainers([tmp_path / "pkg" / "m.py"], tmp_path)
    assert found == [
        "pkg/m.py:2 trainer.step", "pkg/m.py:5 t.history", "pkg/m.py:6 t.?", "pkg/m.py:10 tr.writer"
    ]  # fmt: skip


def _calls(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == name


# --- layers: every import runs down the README's layout -----------------------------------

# The package's layers from the ground up (README "Layout"): a module may import its own
# layer and those below it, never one above. A room is a top-level module or subpackage of
# attnlab/ (attnlab/__init__.py is "__init__": the public face, which imports only errors).
# api/ is what a notebook imports; maintain/, above everything a user runs, is for whoever
# maintains the project (scripts/lab_figures.py, scripts/pretrain.py).
LAYERS = (
    ("__init__", "errors", "progress", "io", "runtime", "threads", "shadowing", "weights"),
    ("config",),
    ("data",),
    ("models",),
    ("runs",),
    ("export",),
    ("evaluation",),
    ("training",),
    ("report",),
    ("tasks",),
    ("bench",),
    ("api",),
    ("cli",),
    ("maintain",),  # the maintainer's tools (lab figures, packaging): nothing imports them
)


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, root: Path) -> bool:
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(root: Path) -> list[tuple[Path, int, str, str]]:
    """Every import of the package at ``root`` of one of its own modules, at the top level
    and inside functions, absolute and relative: (file, line, importer, imported), the
    imported module as precisely as it is named (``from a import b``: ``a.b`` when b is a
    module)."""
    found = []
    for path in _sources(root):
        me = _module(path, root)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [
                    f"{base}.{a.name}" if _is_module(f"{base}.{a.name}", root) else base
                    for a in node.names
                ]
            else:
                continue
            for name in dict.fromkeys(names):
                if name == root.name or name.startswith(root.name + "."):
                    found.append((path, node.lineno, me, name))
    return found


def _layer(module: str) -> int | None:
    parts = module.split(".")
    room = parts[1] if len(parts) > 1 else "__init__"
    return next((i for i, rooms in enumerate(LAYERS) if room in rooms), None)


def upward(root: Path) -> list[str]:
    """Each import that runs up the layers, as "file:line importer -> imported"; a module in
    no layer is named too (a new room must be given its floor)."""
    found = []
    for path, line, me, name in imports(root):
        where = f"{path.relative_to(root.parent)}:{line} {me} -> {name}"
        mine, theirs = _layer(me), _layer(name)
        if mine is None or theirs is None:
            found.append(f"{where} (not in LAYERS)")
        elif theirs > mine:
            found.append(where)
    return found


def circles(root: Path) -> list[list[str]]:
    """Modules that import each other in a loop (lazy imports count), each loop sorted."""
    graph: dict[str, set[str]] = {}
    for _, _, me, name in imports(root):
        graph.setdefault(me, set()).add(name)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            loop = []
            while not loop or loop[-1] != v:
                loop.append(stack.pop())
                on.discard(loop[-1])
            if len(loop) > 1:
                found.append(sorted(loop))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_every_import_runs_down_the_layers():
    assert len(imports(PACKAGE)) > 300  # the reader reads the package's imports
    assert upward(PACKAGE) == []


def test_no_modules_import_each_other_in_a_circle():
    assert circles(PACKAGE) == []


def test_the_layer_guard_names_an_import_that_runs_up(tmp_path):
    """A tmp package with the same rooms: a config module importing tasks (at the top, in
    a function, and relatively) and a task importing config (down: allowed)."""
    pkg = tmp_path / "pkg"
    for folder in ("config", "tasks"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("import os\n")
    (pkg / "tasks" / "work.py").write_text("from pkg.config import keys\nfrom pkg import errors\n")
    (pkg / "config" / "keys.py").write_text(
        "import pkg.errors\nfrom pkg.tasks.work import x\n\n\n"
        "def lazy():\n    from ..tasks import work\n    import pkg.tasks\n"
    )
    (pkg / "config" / "other.py").write_text("from . import keys\n")
    assert upward(pkg) == [
        "pkg/config/keys.py:2 pkg.config.keys -> pkg.tasks.work",
        "pkg/config/keys.py:6 pkg.config.keys -> pkg.tasks.work",
        "pkg/config/keys.py:7 pkg.config.keys -> pkg.tasks",
    ]
    assert circles(pkg) == [["pkg.config.keys", "pkg.tasks.work"]]
    (pkg / "config" / "keys.py").write_text("from pkg import errors\n")
    (pkg / "bench.py").write_text("import pkg.tasks.work\n")
    assert upward(pkg) == []
    (pkg / "nowhere.py").write_text("from pkg.config import keys\n")
    assert upward(pkg) == ["pkg/nowhere.py:1 pkg.nowhere -> pkg.config.keys (not in LAYERS)"]
    assert circles(pkg) == []


def test_api_holds_only_what_a_notebook_imports():
    """attnlab/api/ is the modules behind ``attnlab.load``, ``results`` and ``compare`` (and
    their types); a maintainer's tool put there (lab figures, weight packaging) is named."""
    import attnlab

    api = {f"attnlab.api.{p.stem}" for p in (PACKAGE / "api").glob("*.py") if p.stem != "__init__"}
    assert api == set(attnlab._LAZY.values())
    assert _layer("attnlab.maintain.labfigures") == len(LAYERS) - 1  # the top: nothing imports it
