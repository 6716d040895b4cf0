"""The package as a package index would ship it: `python -m build` gives an sdist and a wheel with the licence, the
model-card template and the code files; the wheel installs into a fresh virtual environment, where the console
command and the README's Python examples run from the installed copy (not from this checkout)."""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
import yaml

import vanilla_transformer
from conftest import ROOT


def source_files():
    """The files a clean clone has (git's list where there is one)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [name for name in out.decode().split("\0") if name and os.path.exists(os.path.join(ROOT, name))]
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """sdist and wheel built from a copy of the tracked files (the checkout stays clean)."""
    src = tmp_path_factory.mktemp("src")
    for name in source_files():
        if name.startswith(("tests/", "docs/images/")):
            continue
        os.makedirs(os.path.join(src, os.path.dirname(name)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), os.path.join(src, name))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    version = vanilla_transformer.__version__
    name = f"vanilla_transformer-{version}"
    sdist, wheel = out / f"{name}.tar.gz", out / f"{name}-py3-none-any.whl"
    assert sdist.is_file() and wheel.is_file(), sorted(os.listdir(out))
    return sdist, wheel


def test_wheel_and_sdist_hold_the_package(dist):
    sdist, wheel = dist
    names = zipfile.ZipFile(wheel).namelist()
    for needed in (
        "vanilla_transformer/model/modeling_vanilla_transformer.py",
        "vanilla_transformer/model/configuration_vanilla_transformer.py",
        "vanilla_transformer/model_card_template.md",
        "vanilla_transformer/evaluation/paper_bleu.py",
        "vanilla_transformer/evaluation/bleu_chrf/bleu_chrf.py",
        "vanilla_transformer/commands/serve.py",
    ):
        assert needed in names
    assert not [
        n for n in names if n.startswith(("tests/", "hub_card/", "scripts/", "benchmarks/")) or "benchmark" in n
    ]
    info = next(n for n in names if n.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(wheel).read(info).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert f"Version: {vanilla_transformer.__version__}" in metadata and "License-Expression: Apache-2.0" in metadata
    for requirement in ("numpy", "packaging", "tqdm", "transformers", "torch"):
        assert re.search(rf"^Requires-Dist: {requirement}\b", metadata, re.M), requirement
    assert "Attention Is All You Need" in metadata.split("\n\n", 1)[1]  # the long description
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"LICENSE", "pyproject.toml", "docs/package.md", "vanilla_transformer/model_card_template.md"} <= members


def test_wheel_installs_and_runs_in_a_fresh_venv(dist, small_demo_model, small_ner_model, tmp_path):
    """The wheel alone in a new environment; the dependencies come from this environment's site-packages (a .pth
    file: no download), where this checkout's editable install is not active."""
    _, wheel = dist
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    with open(os.path.join(site, "dependencies.pth"), "w") as f:
        f.write("\n".join(deps) + "\n")
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = str(env_dir / "bin") + os.pathsep + env.get("PATH", "")

    where = subprocess.run(
        [str(python), "-c", "import vanilla_transformer as v; print(v.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(site), where
    help_text = subprocess.run(
        [str(env_dir / "bin" / "vanilla-transformer"), "--help"], env=env, capture_output=True, text=True, timeout=120
    )
    assert help_text.returncode == 0, help_text.stderr[-2000:]
    assert "train-translation" in help_text.stdout and "serve" in help_text.stdout

    (tmp_path / "outputs").mkdir()
    os.symlink(small_demo_model, tmp_path / "outputs" / "demo")
    os.symlink(small_ner_model, tmp_path / "outputs" / "demo-ner")
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    examples = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(examples) >= 2, "the README's translation and NER examples"
    for code in examples:
        proc = subprocess.run(
            [str(python), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        expected = [line[len("# ->") :].strip() for line in code.splitlines() if line.startswith("# ->")]
        assert expected and [line.strip() for line in proc.stdout.splitlines()] == expected


def test_citation_names_this_project_and_the_paper():
    citation = yaml.safe_load(open(os.path.join(ROOT, "CITATION.cff"), encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0" and citation["version"] == vanilla_transformer.__version__
    assert citation["license"] == "Apache-2.0" and citation["type"] == "software"
    paper = citation["references"][0]
    assert paper["title"] == "Attention Is All You Need" and paper["year"] == 2017
    assert paper["authors"][0]["family-names"] == "Vaswani" and len(paper["authors"]) == 8
    changelog = open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8").read()
    assert f"## [{vanilla_transformer.__version__}]" in changelog
