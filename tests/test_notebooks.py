"""The tutorials run as a learner runs them: each notebook of docs/tutorial/ (Jupyter notebooks kept as Markdown by
jupytext: they diff as text, the documentation site shows them as pages, and no stored output can go stale) is
executed top to bottom in a fresh Python kernel, every cell in order, in an empty working directory, talking to the
loopback Hub. A cell that raises fails the test; the notebooks' own `assert`s check what they show."""

import os

import pytest
from hub_server import hub_env

from conftest import ROOT

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

TUTORIAL = os.path.join(ROOT, "docs", "tutorial")
NOTEBOOKS = sorted(name for name in os.listdir(TUTORIAL) if name.endswith(".md") and name != "index.md")


def test_every_tutorial_page_is_a_notebook_in_the_site():
    """Each notebook is a jupytext notebook with a Python kernel, listed in the site's navigation."""
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        site = f.read()
    assert len(NOTEBOOKS) >= 6, NOTEBOOKS
    for name in NOTEBOOKS:
        notebook = jupytext.read(os.path.join(TUTORIAL, name))
        assert notebook.metadata["kernelspec"]["language"] == "python", name
        assert sum(cell.cell_type == "code" for cell in notebook.cells) >= 3, name
        assert f"tutorial/{name}" in site, name


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_notebook_runs_top_to_bottom(name, hub, tmp_path):
    notebook = jupytext.read(os.path.join(TUTORIAL, name))
    endpoint, _ = hub
    env = hub_env(endpoint, tmp_path / "hf_home", MPLBACKEND="Agg")
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=env)
    errors = [output for cell in notebook.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert errors == []
