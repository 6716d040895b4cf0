"""The documentation site (mkdocs.yml) builds strictly: no broken link, anchor or reference, no docstring the API
reference cannot read. Its API page documents every public name the package exports, and its command reference,
written from the parsers, every flag of every command."""

import importlib
import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="the docs extra builds the site")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra builds the site")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def page(site, path: str) -> str:
    with open(
        os.path.join(site, path, "index.html") if path else os.path.join(site, "index.html"), encoding="utf-8"
    ) as f:
        return f.read()


def test_the_home_page_is_the_readme_with_its_links_on_the_site(site):
    home = page(site, "")
    assert "vanilla-transformer" in home and 'href="training/"' in home and 'href="docs/' not in home


def test_the_api_reference_documents_every_exported_name(site):
    import vanilla_transformer

    api = page(site, "reference/api")
    missing = [name for name in vanilla_transformer.__all__ if f'.{name}" class="doc doc-heading' not in api]
    assert not missing, missing


def test_the_command_reference_shows_every_flag_of_every_command(site):
    import argparse

    from vanilla_transformer.commands import COMMANDS

    reference = page(site, "reference/commands")
    for name, (module, _) in COMMANDS.items():
        parser = importlib.import_module(f"vanilla_transformer.commands.{module}").build_parser()
        parsers = [parser] + [
            sub
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for sub in action.choices.values()
        ]
        flags = {
            flag
            for p in parsers
            for action in p._actions
            for flag in action.option_strings
            if action.help != argparse.SUPPRESS and flag not in ("-h", "--help")
        }
        assert flags and not [flag for flag in flags if f"<code>{flag}</code>" not in reference], name
