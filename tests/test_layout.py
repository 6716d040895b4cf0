"""The package's house rules, read from its source: no import cycle (function-level imports included), no function
over 60 lines, one definition of each helper and each constant (by name, helpers also by shape), no two modules of
one name, the commands in one folder (each with its parser and its main, none imported by the library), and
benchmarks outside the installed package."""

import ast
import os
import re
from collections import defaultdict

import pytest

from conftest import ROOT

PACKAGE = os.path.join(ROOT, "vanilla_transformer")


def modules() -> dict[str, ast.Module]:
    """Dotted module name -> its syntax tree, for every file of the package."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")
                with open(path, encoding="utf-8") as f:
                    found[dotted] = ast.parse(f.read(), path)
    return found


def imports_of(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its file (functions included)."""
    package = name if any(m.startswith(name + ".") for m in known) else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.add(target if target in known else base)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in known and m != name}


def test_no_import_cycle():
    trees = modules()
    graph = {name: imports_of(name, tree, set(trees)) for name, tree in trees.items()}
    # a package's __init__ re-exporting its parts is not a cycle with them; every other edge counts
    edges = {name: {m for m in targets if not m.startswith(name + ".")} for name, targets in graph.items()}
    state, cycles = {}, []

    def visit(node, path):
        state[node] = "open"
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles
    assert "vanilla_transformer.commands.serve" in graph and "vanilla_transformer.deploy.server.app" in graph


def test_no_function_over_60_lines():
    long = [
        f"{name}:{node.lineno} {node.name}"
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60
    ]
    assert not long, long


def test_the_model_file_reads_in_one_sitting():
    """modeling_vanilla_transformer.py at most 1,120 lines in ruff's format, no longer than transformers' own Marian
    (modeling_marian.py, formatted alike): what the paper does not have (named-entity parts, CPU kernels) lives in
    the files beside it."""
    path = os.path.join(ROOT, "vanilla_transformer", "model", "modeling_vanilla_transformer.py")
    with open(path, encoding="utf-8") as f:
        assert sum(1 for _ in f) <= 1120


# What each command module (and each training command's step) defines under the same name, by design
COMMAND_PROTOCOL = {
    "main",
    "build_parser",
    "parse",
    "DataTrainingArguments",
    "demo_defaults",
    "load_raw_datasets",
    "tokenize_splits",
    "prediction_writer",
    "__getattr__",
}


def test_each_helper_is_defined_once():
    """No function or class name is defined at the top of two modules (but the commands' own protocol), and no two
    functions anywhere have the same body: a helper written twice is found by its name or by its shape."""
    defined, shapes = defaultdict(list), defaultdict(list)
    for name, tree in modules().items():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined[node.name].append(name)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if sum(1 for s in body for _ in ast.walk(s)) >= 30:  # more than a line or two
                    shapes[ast.dump(ast.Module(body=body, type_ignores=[]))].append(f"{name}.{node.name}")
    assert not {n: m for n, m in defined.items() if len(m) > 1 and n not in COMMAND_PROTOCOL}
    assert not [where for where in shapes.values() if len(where) > 1]


# Module-level constants that two modules define under one name, by design (name -> why)
SHARED_CONSTANTS = {
    name: "each `evaluate` metric module's own description (evaluation/bleu_chrf, seqeval_f1), under "
    "the name evaluate's metric template gives it"
    for name in ("_DESCRIPTION", "_KWARGS")
}


def test_each_constant_is_defined_once():
    """A module-level constant (an UPPER_CASE name assigned at the top of a module) is defined in one module: two
    meanings under one name (HfArgumentParser's booleans and an environment variable's) are told apart by their
    names, and one meaning has one home that the others import."""
    defined = defaultdict(list)
    for name, tree in modules().items():
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id.isupper():
                        defined[leaf.id].append(name)
    assert not {n: m for n, m in defined.items() if len(m) > 1 and n not in SHARED_CONSTANTS}


def test_no_two_modules_share_a_name_and_the_commands_live_together():
    from vanilla_transformer.commands import COMMANDS

    names = defaultdict(list)
    for dotted in modules():
        names[dotted.rpartition(".")[2]].append(dotted)
    assert not {n: m for n, m in names.items() if len(m) > 1 and n != "__main__"}
    commands = {m.rpartition(".")[2] for m in modules() if m.startswith("vanilla_transformer.commands.")}
    assert commands == {module for module, _ in COMMANDS.values()}
    for dotted, tree in modules().items():  # no other module builds a command line
        if not dotted.startswith("vanilla_transformer.commands") and dotted != "vanilla_transformer.cli":
            calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
            assert not [f for f in calls if isinstance(f, ast.Attribute) and f.attr == "ArgumentParser"], dotted


def test_renames_into_place_live_in_one_helper():
    """Whole-or-nothing writes go through files.replaced_atomically. Two renames keep their own rule: a checkpoint
    staged where the Trainer saves it, and the tokenizer cache, where a finished one another run may be reading is
    kept, not replaced."""
    renaming = sorted(
        name
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("replace", "rename")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )
    assert renaming == [
        "vanilla_transformer.files",
        "vanilla_transformer.training.checkpoints",
        "vanilla_transformer.training.models",
    ], renaming


def test_benchmarks_live_outside_the_package():
    assert not [name for name in modules() if "benchmark" in name]
    assert os.path.isfile(os.path.join(ROOT, "benchmarks", "run.py"))


def test_ruff_finds_nothing():
    """The lint and format configuration in pyproject.toml ([tool.ruff]) holds for the whole tree (`make lint`)."""
    import subprocess
    import sys

    pytest.importorskip("ruff", reason="ruff comes with the test extra")
    for command in (["check"], ["format", "--check"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--no-cache", ROOT], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, (command, proc.stdout[-4000:])


def test_the_server_state_is_read_through_one_dependency():
    """The HTTP server's routes take its state as a parameter (`deploy.server.state.Server`, FastAPI's dependency):
    the app's state is read in that dependency alone and set once, in `create_app`; no `server(request)` helper."""
    places = []  # (module, innermost function) of each `app.state` / `request.app.state`, and each `server(...)` call

    def visit(node, module: str, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.Attribute)
                and child.attr == "state"
                and (
                    isinstance(child.value, ast.Name)
                    and child.value.id == "app"
                    or isinstance(child.value, ast.Attribute)
                    and child.value.attr == "app"
                )
            ):
                places.append(f"{module}.{function}")
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "server":
                places.append(f"{module}.{function}: server(...)")
            visit(child, module, child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function)

    for name, tree in modules().items():  # the whole package: the commands too
        visit(tree, name, "<module>")
    assert sorted(places) == [
        "vanilla_transformer.deploy.server.app.create_app",
        "vanilla_transformer.deploy.server.state.server_state",
    ], places


def test_every_command_has_its_parser_and_main_and_only_the_entry_points_import_commands():
    """Each module of commands/ defines `build_parser()` (argparse's, or the training commands' HfArgumentParser) and
    `main(argv)`; the library never imports a command (a lower room never imports a higher one): only the entry
    points do, cli.py and the `python -m` faces of the training commands (run_translation, run_ner, run_mlm)."""
    trees = modules()
    commands = {name: tree for name, tree in trees.items() if name.startswith("vanilla_transformer.commands.")}
    assert len(commands) > 10
    for name, tree in commands.items():
        top = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert {"build_parser", "main"} <= top, name
    entry_points = {f"vanilla_transformer.{m}" for m in ("cli", "run_translation", "run_ner", "run_mlm")}
    importing = {
        name
        for name, tree in trees.items()
        if not name.startswith("vanilla_transformer.commands")
        and name not in entry_points
        and any(m.startswith("vanilla_transformer.commands") for m in imports_of(name, tree, set(trees)))
    }
    assert not importing, importing


def test_the_map_of_the_house_names_every_room():
    """docs/design.md's map ("Where the rest lives") names every module and folder of the package's top floor, of
    deploy/ and of deploy/server/: the map matches the folders."""
    with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as f:
        page = f.read()
    block = page.split("## Where the rest lives", 1)[1].split("```")[1]
    named = set(re.findall(r"[\w.]+", block))
    rooms = []
    for folder in ("", "deploy", os.path.join("deploy", "server")):
        for entry in sorted(os.listdir(os.path.join(PACKAGE, folder))):
            if (
                entry.endswith((".py", ".html", ".md"))
                and entry != "__init__.py"
                or (os.path.isdir(os.path.join(PACKAGE, folder, entry)) and not entry.startswith("__"))
            ):
                rooms.append((folder, entry))
    missing = [
        os.path.join(folder, entry) for folder, entry in rooms if entry not in named and entry + "/" not in block
    ]
    assert not missing, missing
