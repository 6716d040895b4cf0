"""The documentation's code runs: every ```python block of README.md and docs/, and every ```bash block marked
`<!-- test: run -->`, is executed against a small trained demo model standing in for `outputs/demo`; lines
`# -> TEXT` after a block's command give the output it must print. A small tagger stands in for `outputs/demo-ner`.
With VT_DEMO_MODEL=outputs/demo (after `make demo`) the README's examples run against the real demo model instead.
The package's description (docs/package.md, the page a package index shows) uses no link or image a package index
cannot resolve."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

MARK = "<!-- test: run -->"
BLOCK = re.compile(r"(<!-- test: run -->\n)?```(python|bash)\n(.*?)```", re.S)


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
    return [line[len("# ->"):].strip() for line in code.splitlines() if line.startswith("# ->")]


def test_the_readme_examples_are_collected():
    """The README's Python example and its deployment commands are among the blocks run below."""
    ids = [p.id for p in runnable_blocks()]
    assert sum(i.startswith("README.md#") for i in ids) >= 2, ids


@pytest.mark.parametrize("language, code", runnable_blocks())
def test_documented_code_runs(language, code, small_demo_model, small_ner_model, tmp_path):
    demo = os.environ.get("VT_DEMO_MODEL")
    (tmp_path / "outputs").mkdir()
    os.symlink(os.path.abspath(demo) if demo else small_demo_model, tmp_path / "outputs" / "demo")
    os.symlink(small_ner_model, tmp_path / "outputs" / "demo-ner")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # vanilla-transformer, python
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = expected_output(code)
    if expected:
        assert [line.strip() for line in proc.stdout.splitlines()] == expected


def test_package_description_has_only_absolute_links():
    """A package index shows docs/package.md without the repository around it: relative links and images break."""
    text = open(os.path.join(ROOT, "docs", "package.md"), encoding="utf-8").read()
    targets = re.findall(r"\]\(([^)]+)\)", text) + re.findall(r'src="([^"]+)"', text)
    assert targets, "expected at least the paper's link"
    assert [t for t in targets if not t.startswith("https://")] == []
    assert "pyproject.toml" in os.listdir(ROOT)
    assert 'readme = "docs/package.md"' in open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()


def test_readme_results_come_from_the_results_page():
    """Every number in README's results table (scores, times, versions) is one docs/results.md shows too: the README
    summarises, it does not hold numbers of its own."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    results = open(os.path.join(ROOT, "docs", "results.md"), encoding="utf-8").read()
    section = readme[readme.index("## Results"):]
    rows = [line for line in section[:section.index("\n## ")].splitlines() if line.startswith("| ")][2:]
    assert len(rows) >= 3, rows
    for row in rows:
        recipe = row.split("|")[1].strip()
        numbers = re.findall(r"\d+(?:\.\d+)*", "|".join(row.split("|")[2:]))
        assert numbers, row
        missing = [n for n in numbers if not re.search(rf"(?<![\d.]){re.escape(n)}(?![\d]|\.\d)", results)]
        assert not missing, f"README results row {recipe!r}: {missing} not in docs/results.md"
