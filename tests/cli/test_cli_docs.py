"""docs/cli.md documents every subcommand of the parser and every option of each, in that subcommand's section."""

import argparse
import os
import re

from i6_shard.cli import build_parser

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "cli.md")


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _sections():
    """{heading of a level-2 section: its text}."""
    text = open(DOC, encoding="utf-8").read()
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_subcommand_has_a_section():
    missing = sorted(set(_subcommands()) - set(_sections()))
    assert not missing, f"docs/cli.md has no '## <command>' section for {missing}"


def test_every_option_is_documented_in_its_section():
    sections = _sections()
    undocumented = []
    for name, sub in _subcommands().items():
        body = sections.get(name, "")
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            spelled = list(action.option_strings) or [action.metavar or action.dest.upper()]
            if not any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", body) for s in spelled):
                undocumented.append(f"{name} {spelled[0]}")
    assert not undocumented, f"docs/cli.md does not document: {undocumented}"


def test_the_top_level_options_are_documented():
    text = open(DOC, encoding="utf-8").read()
    for action in build_parser()._actions:
        longs = [s for s in action.option_strings if s.startswith("--") and s != "--help"]
        for opt in longs:
            assert opt in text, f"docs/cli.md does not mention {opt}"


def test_the_tables_of_plan_options_are_written_from_the_one_table():
    """Each command that takes plan options has a table of them in its section, as scripts/write_cli_docs.py writes
    it from core.PLAN_OPTIONS: a row changed in the table and not here fails."""
    import importlib.util

    from i6_shard.core import PLAN_OPTIONS

    path = os.path.join(os.path.dirname(os.path.dirname(DOC)), "scripts", "write_cli_docs.py")
    spec = importlib.util.spec_from_file_location("write_cli_docs", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = open(DOC, encoding="utf-8").read()
    assert script.rewritten(text) == text, (
        "docs/cli.md's plan options differ from the table: run scripts/write_cli_docs.py"
    )
    sections = _sections()
    commands = {command for o in PLAN_OPTIONS.values() for command in o.commands}
    for command in commands:
        assert f"<!-- plan options: {command} -->" in sections[command], command
    changed = script.rewritten(text.replace("| sub-epochs per full epoch; required |", "| sub-epochs; required |"))
    assert changed == text  # what the script writes is the table's, whatever the page held
