"""The documentation's code runs: every ```python block of README.md and docs/, and every ```bash block marked
`<!-- test: run -->`, is executed against a small trained demo model standing in for `outputs/demo`; lines
`# -> TEXT` after a block's command give the output it must print. A small tagger stands in for `outputs/demo-ner`.
The Hub ids of HUB_MODELS load those models from the loopback Hub-API server, where the blocks may push too.
With VT_DEMO_MODEL=outputs/demo (after `make demo`) the README's examples run against the real demo model instead.
The package's description (docs/package.md, the page a package index shows) uses no link or image a package index
cannot resolve."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest
from hub_server import hub_env

from conftest import ROOT, push

MARK = "<!-- test: run -->"
BLOCK = re.compile(r"(<!-- test: run -->\n)?```(python|bash)\n(.*?)```", re.S)


def text_of(*parts) -> str:
    """A file of the repository (path parts from its root), as text."""
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def documents():
    paths = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "CONTRIBUTING.md")]
    docs = os.path.join(ROOT, "docs")
    paths += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    return paths


def runnable_blocks():
    blocks = []
    for path in documents():
        text = open(path, encoding="utf-8").read()
        for number, match in enumerate(BLOCK.finditer(text), start=1):
            marked, language, code = match.groups()
            if language == "python" or marked:
                name = f"{os.path.relpath(path, ROOT)}#{number}"
                blocks.append(pytest.param(language, code, id=name))
    return blocks


def expected_output(code: str) -> list[str]:
    return [line[len("# ->") :].strip() for line in code.splitlines() if line.startswith("# ->")]


def test_the_readme_examples_are_collected():
    """The README's Python example and its deployment commands are among the blocks run below."""
    ids = [p.id for p in runnable_blocks()]
    assert sum(i.startswith("README.md#") for i in ids) >= 2, ids


# The Hub ids the docs load, pushed to the loopback Hub (tests/hub_server.py) from the models standing in for them
HUB_MODELS = {"you/vanilla-transformer-demo": "outputs/demo", "you/vanilla-transformer-demo-ner": "outputs/demo-ner"}


@pytest.fixture(scope="module")
def stand_ins(small_demo_model, small_ner_model):
    """The models standing in for the docs' saved ones: {path the docs name: directory}."""
    demo = os.environ.get("VT_DEMO_MODEL")
    return {"outputs/demo": os.path.abspath(demo) if demo else small_demo_model, "outputs/demo-ner": small_ner_model}


@pytest.fixture(scope="module")
def docs_hub(hub, stand_ins, tmp_path_factory):
    """The loopback Hub's endpoint, holding HUB_MODELS as `vanilla-transformer push` leaves them."""
    endpoint, _ = hub
    tmp_path = tmp_path_factory.mktemp("docs_hub")
    for repo_id, saved in HUB_MODELS.items():
        proc = push(endpoint, tmp_path, stand_ins[saved], repo_id)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return endpoint


@pytest.mark.parametrize("language, code", runnable_blocks())
def test_documented_code_runs(language, code, stand_ins, docs_hub, tmp_path):
    (tmp_path / "outputs").mkdir()
    for saved, directory in stand_ins.items():
        os.symlink(directory, tmp_path / saved)
    env = hub_env(docs_hub, tmp_path / "hf_home")  # Hub ids resolve on the loopback Hub
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # vanilla-transformer, python
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = expected_output(code)
    if expected:
        assert [line.strip() for line in proc.stdout.splitlines()] == expected


def test_package_description_has_only_absolute_links():
    """A package index shows docs/package.md without the repository around it: relative links and images break."""
    text = text_of("docs", "package.md")
    targets = re.findall(r"\]\(([^)]+)\)", text) + re.findall(r'src="([^"]+)"', text)
    assert targets, "expected at least the paper's link"
    assert [t for t in targets if not t.startswith("https://")] == []
    assert "pyproject.toml" in os.listdir(ROOT)
    assert 'readme = "docs/package.md"' in text_of("pyproject.toml")


def test_the_readme_quotes_no_measured_figure():
    """A measured figure lives in one table of docs/ (results.md, benchmarks.md, ...), which the README links to: its
    prose and tables hold no scores, times, speeds or ratios, only versions, addresses and the demo's pass mark."""
    from vanilla_transformer.commands.train_translation import DEMO_MIN_EXACT_MATCH

    text = text_of("README.md")
    text = re.sub(r"`[^`]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
    figures = re.finditer(r"(?<![\w.])\d+(?:[.,]\d+)*(?: ?(?:s|ms|min|minutes|seconds|hours|%|x|/s)\b)?", text)
    version = re.compile(r"(?:Python|transformers|torch|>=|<|Apache-|//[\d.]*)\s*$")
    measured = [
        m.group(0)
        for m in figures
        if not version.search(text[max(0, m.start() - 16) : m.start()])
        and (re.search(r"[.,]\d", m.group(0)) or not m.group(0).isdigit())
        and m.group(0) != str(DEMO_MIN_EXACT_MATCH)
    ]
    assert measured == [], measured


def test_readme_results_name_each_recipe_s_command_and_section():
    """README's results table: one row per recipe, its make target a real one and its link a results.md heading."""
    readme = text_of("README.md")
    results = text_of("docs", "results.md")
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", results, re.M)
    }
    section = readme[readme.index("## Results") :]
    rows = [line for line in section[: section.index("\n## ")].splitlines() if line.startswith("| ")][2:]
    assert len(rows) >= 4, rows
    makefile = text_of("Makefile")
    for row in rows:
        target = re.search(r"`make ([\w-]+)`", row).group(1)
        assert re.search(rf"^{target}:", makefile, re.M), row
        anchor = re.search(r"docs/results\.md#([\w-]+)", row).group(1)
        assert anchor in anchors, (anchor, sorted(anchors))


def test_the_multi30k_recipe_the_results_page_describes_is_the_script():
    """The schedule docs/results.md gives for `make recipe-multi30k` is the one recipes/multi30k.sh trains with."""
    script = text_of("recipes", "multi30k.sh")
    results = " ".join(text_of("docs", "results.md").split())
    flags = dict(re.findall(r"--(learning_rate|warmup_steps|num_train_epochs) (\S+)", script.split("train() {")[1]))
    described = (
        f"peak learning rate {flags['learning_rate']} with {flags['warmup_steps']} warm-up steps and cosine "
        f"decay over {flags['num_train_epochs']} epochs"
    )
    assert described in results, described


def test_the_ensemble_recipe_s_figures_are_its_run_s_files():
    """docs/results.md's row for `make recipe-multi30k-best` quotes the run's own metrics files (docs/recipe-runs/),
    and the target is the recipe the section describes."""

    def metrics(*parts):
        return json.loads(text_of("docs", "recipe-runs", "multi30k-best", *parts))

    results = text_of("docs", "results.md")
    section = results[results.index("### Two models as one ensemble") :]
    row = [line for line in section.splitlines() if line.startswith("| ")][2]
    members = [metrics(f"member{i}", "all_results.json") for i in (1, 2)]
    tune, validation = metrics("tune", "eval_results.json"), metrics("validation", "eval_results.json")
    quoted = [
        f"{max(m['train_wall_seconds'] for m in members) / 60:.1f} min",
        " / ".join(f"{m['train_steps_per_second']:.2f}" for m in members) + " steps/s",
        f"{metrics('run.json')['wall_seconds'] / 60:.1f} min",
        " / ".join(f"{m['eval_bleu']:.2f}" for m in (*members, tune)),
        f"{validation['eval_bleu']:.2f} ({validation['eval_chrf']:.2f})",
    ]
    assert [q for q in quoted if q not in row] == [], (quoted, row)
    assert metrics("run.json")["command"] == "make recipe-multi30k-best"
    assert tune["eval_samples"] == 1015 and validation["eval_samples"] == 1014
    makefile = text_of("Makefile")
    recipe = makefile[makefile.index("recipe-multi30k-best: setup") :].splitlines()[1].strip()
    assert recipe.replace("PY=$(PY) ", "").replace("$(DATA)", "../shared/data") in " ".join(section.split())


# ------------------------------------------------------------------------------------- every flag and target exists

COMMAND = re.compile(
    r"vanilla-transformer\s+(?:--debug\s+)?([a-z][a-z0-9-]*)"
    r"|(?:vanilla_transformer[./]|scripts/)(run_translation|run_ner|run_mlm|benchmark|load_test)\b"
    r"|recipes/(multi30k|wmt14_en_de|conll)\.sh"
)
ALIASES = {
    "run_translation": "train-translation",
    "run_ner": "train-ner",
    "run_mlm": "pretrain-encoder",
    "multi30k": "train-translation",
    "wmt14_en_de": "train-translation",
    "conll": "train-ner",
}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*")
OTHER_TOOLS = re.compile(
    r"^\s*(?:\S+=\S+\s+)*(?:\S*/)?"
    r"(torchrun|accelerate|pip|python -m (?:build|pip|pytest)|duplicates)\b"
)


def command_lines(text: str):
    """(line number, text) of each command in a code block (continued lines joined) and each inline code span."""
    lines, in_block, i = text.splitlines(), False, 0
    while i < len(lines):
        line, start = lines[i], i
        if line.strip().startswith("```"):
            in_block = not in_block
        elif in_block:
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i]
            yield start + 1, line
        else:
            yield from ((i + 1, span) for span in re.findall(r"`([^`]+)`", line))
        i += 1


@pytest.fixture(scope="module")
def flags_of():
    """Every flag each command's --help lists: every subcommand `vanilla-transformer --help` names,
    scripts/benchmark.py and scripts/load_test.py."""
    import contextlib
    import io
    import runpy

    from vanilla_transformer.cli import build_parser, main

    def help_of(run):
        out, argv0 = io.StringIO(), sys.argv[0]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                run()
            except SystemExit:
                pass
        sys.argv[0] = argv0
        return set(FLAG.findall(out.getvalue()))

    commands = re.findall(r"^ {4}([a-z][a-z0-9-]*)", build_parser().format_help(), re.M)
    assert len(commands) >= 14 and "tag" in commands, commands
    flags = {name: help_of(lambda name=name: main([name, "--help"])) for name in commands}
    from benchmarks.run import main as benchmark_main

    flags["benchmark"] = help_of(lambda: benchmark_main(["--help"]))
    script, argv = os.path.join(ROOT, "scripts", "load_test.py"), sys.argv
    sys.argv = [script, "--help"]
    try:
        flags["load_test"] = help_of(lambda: runpy.run_path(script, run_name="__main__"))
    finally:
        sys.argv = argv
    assert all(len(found) >= 2 for found in flags.values()), flags  # --help itself and at least one more
    return flags


def test_every_documented_flag_exists(flags_of):
    """Each `--flag` written after a command in README.md, CONTRIBUTING.md or docs/ is one that command's parser
    takes (the recipes pass theirs to the training command); a flag written alone is one some command takes, or one of
    transformers' example flags the commands refuse by name. Flags of other tools (torchrun, accelerate, pip, pytest,
    duplicates) are not checked."""
    from vanilla_transformer.deploy.server.settings import NOT_TAKEN  # (LibreTranslate's, documented as refused)
    from vanilla_transformer.training.arguments import EXAMPLE_FLAGS  # (documented as refused, with their advice)

    known = set().union(*flags_of.values()) | {f"--{name}" for name in EXAMPLE_FLAGS} | set(NOT_TAKEN)
    wrong = []
    for path in documents():
        name = os.path.relpath(path, ROOT)
        for number, line in command_lines(open(path, encoding="utf-8").read()):
            if line.lstrip().startswith("#"):  # a comment line in a code block
                continue
            for piece in re.split(r"\|\|?|&&|;", line):
                matches = list(COMMAND.finditer(piece))
                if not matches:
                    if not OTHER_TOOLS.match(piece):
                        wrong += [
                            f"{name}:{number}: {flag} (no command takes it)"
                            for flag in FLAG.findall(piece)
                            if flag not in known
                        ]
                    continue
                for match, following in zip(matches, [*matches[1:], None]):
                    command = match.group(1) or ALIASES.get(match.group(2) or match.group(3), match.group(2))
                    if command == "COMMAND":  # a placeholder
                        continue
                    if command not in flags_of:
                        wrong.append(f"{name}:{number}: no command {command!r}")
                        continue
                    words = piece[match.end() : following.start() if following else len(piece)]
                    wrong += [
                        f"{name}:{number}: {flag} is not a flag of {command}"
                        for flag in FLAG.findall(words)
                        if flag not in flags_of[command]
                    ]
    assert wrong == []


def test_every_documented_make_target_exists():
    """Each `make TARGET` in README.md, CONTRIBUTING.md or docs/ (code blocks and inline code) is a Makefile target."""
    makefile = text_of("Makefile")
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))
    named = {
        (os.path.relpath(path, ROOT), target)
        for path in documents()
        for _, line in command_lines(open(path, encoding="utf-8").read())
        for target in re.findall(r"(?:^|[\s;&(])make\s+([a-z][a-z0-9-]*)", line)
    }
    assert len(named) >= 5 and {target for _, target in named} >= {"setup", "test", "demo"}
    assert sorted(f"{path}: make {target}" for path, target in named if target not in targets) == []


# ------------------------------------------------------------------------------- versions and defaults from the code


def test_the_python_the_docs_name_is_the_one_pyproject_admits():
    """ "Python 3.X or newer" in README and CONTRIBUTING is pyproject.toml's `requires-python`, its classifiers run from
    there, and CI's test-latest runs the newest of them."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    oldest = re.fullmatch(r">=3\.(\d+)", project["requires-python"]).group(1)
    for page in ("README.md", "CONTRIBUTING.md"):
        named = re.findall(r"Python 3\.(\d+) or newer", text_of(page))
        assert named and set(named) == {oldest}, (page, named)
    minors = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c))
    assert minors == list(range(int(oldest), minors[-1] + 1))
    assert f'PYTHON="$(python_of 3.{minors[-1]})"' in text_of(".ci", "run")


def test_quoted_version_floors_are_pyproject_s():
    """Every "torch >= X" / "transformers >= Y" the docs quote is pyproject.toml's floor."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        requirements = tomllib.load(f)["project"]["dependencies"]
    floors = {
        name: re.search(rf"^{name}>=([\d.]+)", r).group(1)
        for name in ("torch", "transformers")
        for r in requirements
        if re.match(rf"{name}>=", r)
    }
    assert set(floors) == {"torch", "transformers"}, requirements
    pages = ["README.md", "CONTRIBUTING.md"] + [
        os.path.join("docs", p) for p in os.listdir(os.path.join(ROOT, "docs")) if p.endswith(".md")
    ]
    quoted = 0
    for page in pages:
        text = text_of(page)
        for name, version in re.findall(r"\b(torch|transformers) >= ([\d.]+)", text):
            assert version == floors[name], f"{page}: {name} >= {version}, pyproject.toml: {floors[name]}"
            quoted += 1
    assert quoted >= 2


def test_the_training_defaults_table_is_the_argument_classes():
    from vanilla_transformer.training.arguments import (
        MlmTrainingArguments,
        NerTrainingArguments,
        TranslationTrainingArguments,
    )

    text = text_of("docs", "training.md")
    table = text.split("<!-- defaults:", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| `--")]
    assert len(rows) >= 10
    columns = (TranslationTrainingArguments, NerTrainingArguments, MlmTrainingArguments)
    for flag, *values in rows:
        name = flag.strip().strip("`").removeprefix("--")
        for cls, value in zip(columns, values):
            default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
            default = getattr(default, "value", default)  # an enum's value
            assert str(default) == value.strip(), (cls.__name__, name, default, value)


def test_the_demo_defaults_the_training_page_lists_are_the_commands():
    """training.md's demo defaults are DEMO_ARGS of train-translation (with its exact-match floor) and train-ner's
    demo configuration, flag for flag."""
    from vanilla_transformer.commands import train_ner, train_translation

    text = text_of("docs", "training.md")
    section = " ".join(text[text.index("<!-- demo defaults") :].split("\n\n")[0].split())
    translation, ner = section.split("- `train-ner`")
    assert " ".join(train_translation.DEMO_ARGS) in translation.replace("`", ""), translation
    assert f"below {train_translation.DEMO_MIN_EXACT_MATCH}" in translation
    assert f"--config_overrides {train_ner.DEMO_CONFIG_OVERRIDES}" in ner.replace("`", ""), ner


def test_serve_limits_table_is_the_flags_defaults():
    from vanilla_transformer.commands.serve import parse_args

    text = text_of("docs", "serving.md")
    limits = re.findall(r"`--([\w-]+)` \((-?[\d.]+) ?(MiB|s|sentences)?", text.split("## Limits and errors", 1)[1])
    assert len(limits) >= 10, limits
    defaults = parse_args(["model"])
    for flag, number, unit in limits:
        value = float(number) * (1 << 20 if unit == "MiB" else 1)
        name = flag.replace("-", "_")
        assert getattr(defaults, name) == value, (flag, getattr(defaults, name), number, unit)


def test_the_flex_head_size_the_docs_quote_is_the_models():
    """docs/configuration.md's least head size for flex attention on a CPU is the one the model enforces."""
    from vanilla_transformer.model.modeling_vanilla_transformer import FLEX_ON_CPU_MIN_HEAD_DIM

    text = " ".join(text_of("docs", "configuration.md").split())
    assert re.findall(r"heads of at least 16 dimensions on a GPU and (\d+) on a CPU", text) == [
        str(FLEX_ON_CPU_MIN_HEAD_DIM)
    ]


def test_every_test_security_md_names_is_a_test():
    """docs/security.md holds each rule to the tests named beside it: each name is a test function of tests/."""
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", text_of("docs", "security.md")))
    defined = set()
    for name in os.listdir(os.path.join(ROOT, "tests")):
        if name.startswith("test_") and name.endswith(".py"):
            defined |= set(re.findall(r"^def (test_[a-z0-9_]+)\(", text_of("tests", name), re.MULTILINE))
    assert len(named) > 20 and not named - defined, sorted(named - defined)


# ------------------------------------------------------------------------------ measured figures live in tables

UNIT = (
    r"x|%|ms|µs|s|min|minutes?|seconds?|hours?|days?|[KMG]i?B|kB|bytes|[GT]FLOP/s|(?:[a-z]+ ?)?/s|"
    r"(?:sentences|tokens|steps|pairs|texts|requests|words|characters|batches)(?: ?/ ?| per )s(?:econd)?"
)
FIGURE = re.compile(
    rf"(?<![\w.,/^-])(?:\d+(?:,\d{{3}})*(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?(?:{UNIT})(?![\w/])"  # 1.66x, 3 s, 25-65 s
    r"|\d+\.\d{2,}(?![\d.])(?!\.\d))"  # a score or a rate with two or more decimals: 41.08
)
# a number right after a package's name (and the versions before it: "torch 2.13 and 2.14") is a version
VERSION = re.compile(
    r"\d+\.\d+\.\d+|(?:\bv|version|Python|torch|transformers|CUDA|driver|CTranslate2|Runtime|redis-server|DeepSpeed"
    r"|accelerate|pypdf|nginx)(?:[\s,+<>=]|\d+(?:\.\d+)*|and|or)*$",
    re.I,
)


def blanked(match: re.Match) -> str:
    """The match as spaces, its line breaks kept (line numbers and columns stay)."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose_figures(text: str):
    """(line number, figure, line) of each measured-looking figure outside tables, code and link targets: times,
    speeds, ratios, shares, sizes, and numbers with two or more decimals (versions and dates are not figures; a
    figure with a unit is never a version)."""
    text = re.sub(r"^\s*```.*?^\s*```", blanked, text, flags=re.S | re.M)  # code blocks
    text = re.sub(r"`[^`]*`", blanked, text)  # inline code, also where it wraps onto the next line
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(("|", "<!--")):
            continue
        prose = re.sub(r"\d{4}-\d{2}-\d{2}", "", re.sub(r"\]\([^)]*\)", "]", line))
        for match in FIGURE.finditer(prose):
            figure = match.group(0).strip()
            unitless = re.fullmatch(r"[\d.,]+", figure)
            if unitless and (
                VERSION.search(prose[max(0, match.start() - 24) : match.start()]) or VERSION.fullmatch(figure)
            ):
                continue
            yield number, match.group(0), line


def pages():
    root_pages = [os.path.join(ROOT, name) for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    docs = os.path.join(ROOT, "docs")
    return root_pages + sorted(
        os.path.join(folder, name) for folder, _, names in os.walk(docs) for name in names if name.endswith(".md")
    )


@pytest.mark.parametrize("path", pages(), ids=lambda path: os.path.relpath(path, ROOT))
def test_a_measured_figure_lives_in_a_table(path):
    """A measured figure (a time, speed, ratio, share, size or score) lives in a table with its command, CPU, dtype
    and versions; prose states it only as a summary of a table row of the same page (the same figure, word for word,
    in that table). A setting is written as code (`--timeout` `5` s, `1 MiB`), a formula too (`2 x d^2`)."""
    text = open(path, encoding="utf-8").read()
    cells = {
        figure.group(0).strip()
        for line in text.splitlines()
        if line.lstrip().startswith("|")
        for figure in FIGURE.finditer(line)
    }
    loose = [f"{number}: {figure}" for number, figure, _ in prose_figures(text) if figure.strip() not in cells]
    assert loose == [], loose
