"""MkDocs hooks of the documentation site (mkdocs.yml): the repository's own pages join the site as they are
(README.md the home page, CONTRIBUTING.md, CHANGELOG.md; their links to docs/ made relative to the site), and the
command reference (docs/reference/commands.md) is written from each command's parser, so a flag, its default and
its help are never documented by hand."""

import argparse
import importlib
import os
import re

from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = {"README.md": "index.md", "CONTRIBUTING.md": "contributing.md", "CHANGELOG.md": "changelog.md"}
STATIC = ("LICENSE", "CITATION.cff")  # files the pages link to, copied as they are
MARKER = "<!-- commands: written from the parsers -->"


def site_markdown(text: str) -> str:
    """A repository page's Markdown with its links as the site has them: docs/X -> X, a repository page -> its
    page."""
    text = re.sub(r"\]\(docs/", "](", text)
    for name, page in PAGES.items():
        text = re.sub(rf"\]\({re.escape(name)}(#|\))", rf"]({page}\1", text)
    return text


def on_files(files, config):
    for name, page in PAGES.items():
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            files.append(File.generated(config, page, content=site_markdown(f.read())))
    for name in STATIC:
        files.append(File.generated(config, name, abs_src_path=os.path.join(ROOT, name)))
    return files


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        return markdown.replace(MARKER, commands_reference())
    return markdown


def commands_reference() -> str:
    """Every console command's flags, from its `build_parser()`: a section each, a table of its options."""
    from vanilla_transformer.commands import COMMANDS

    sections = []
    for name, (module, help_text) in COMMANDS.items():
        parser = importlib.import_module(f"vanilla_transformer.commands.{module}").build_parser()
        sections.append(f"## {name}\n\n{help_text}\n\n{usage(name, parser)}\n\n{options_table(parser)}")
    return "\n\n".join(sections)


def usage(name: str, parser: argparse.ArgumentParser) -> str:
    parser.prog = f"vanilla-transformer {name}"
    return "```text\n" + parser.format_usage().strip() + "\n```"


def options_table(parser: argparse.ArgumentParser) -> str:
    """A Markdown table of the parser's arguments (each subcommand's in turn): flags, default, help. argparse has no
    public list of a parser's arguments: `_actions` is what every documentation generator reads (sphinx-argparse)."""
    rows, subcommands = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            subcommands.extend(action.choices.items())
            continue
        if action.help == argparse.SUPPRESS or action.dest == "help":
            continue
        flags = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
        shown = action.option_strings and action.default not in (None, argparse.SUPPRESS)
        rows.append(f"| {flags} | {f'`{action.default}`' if shown else ''} | {cell(action.help or '', action)} |")
    table = "| argument | default | what it does |\n| --- | --- | --- |\n" + "\n".join(rows) if rows else ""
    for sub, subparser in subcommands:
        table += f"\n\n### {sub}\n\n{options_table(subparser)}"
    return table


def cell(text: str, action) -> str:
    """Help text fit for a table cell: argparse's %(default)s and the like filled in, one line, no pipe breaking the
    columns."""
    try:
        text = text % {**vars(action), "prog": ""}
    except (KeyError, TypeError, ValueError):
        pass
    return " ".join(text.split()).replace("|", "\\|")
