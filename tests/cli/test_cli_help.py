"""The parser as a newcomer meets it: every option explained, the plan options' defaults and meanings from the one
table of them, an example per command that parses, and errors that name the next step."""

import argparse
import os
import shlex

import pytest

from i6_shard import core
from i6_shard.cli import EXAMPLES, build_parser, main
from i6_shard.core.pure import PLAN_OPTION_DEFAULTS, PLAN_OPTIONS
from i6_shard.core.pure.settings import DISTRIBUTIONS


def _commands():
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _option(parser: argparse.ArgumentParser, name: str) -> argparse.Action:
    return next(a for a in parser._actions if a.dest == name)


def test_plan_options_take_default_and_help_from_the_table():
    plan = _commands()["plan"]
    for name, default in PLAN_OPTION_DEFAULTS.items():
        option = PLAN_OPTIONS[name]
        if option.flags:  # spelled as flags of their own (--unsharded, --no-cached-file): each with its own help
            for flag in option.flags:
                assert _option(plan, flag.dest).help == flag.help, flag.flag
            continue
        action = _option(plan, name)
        assert action.default == default, name
        if option.hidden:
            assert action.help == argparse.SUPPRESS and action.option_strings[0] not in plan.format_help(), name
        else:
            assert action.help.replace("%%", "%").startswith(PLAN_OPTIONS[name].help), name
    assert _option(plan, "random_seed_offset").default is None  # the table's, where the command line said 0


def test_the_help_offers_three_distributions_and_the_others_are_still_accepted():
    text = " ".join(_commands()["plan"].format_help().split())
    assert "--distribution {returnn,balanced,equal_steps}" in text
    assert "flexible" not in text and "flexible" not in " ".join(_commands()["demo"].format_help().split())
    for name in DISTRIBUTIONS:  # a plan file's or an earlier recipe's distribution still parses
        argv = ["plan", "--sizes", "s.npz", "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "2"]
        assert build_parser().parse_args(argv + ["--distribution", name, "-o", "p"]).distribution == name
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv + ["--distribution", "even", "-o", "p"])


def test_every_option_has_help_and_every_command_an_example():
    for name, parser in _commands().items():
        for action in parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}: no help"
        assert parser.epilog.startswith("example"), name
        assert isinstance(parser.formatter_class, type) and issubclass(
            parser.formatter_class, argparse.RawDescriptionHelpFormatter
        )
        text = parser.format_help()
        for _, argv in EXAMPLES[name]:
            assert f"python -m i6_shard {argv}" in text  # as written, lines unwrapped
    assert set(EXAMPLES) == set(_commands())
    assert "--seq-ordering" in _commands()["plan"].format_help()
    assert PLAN_OPTIONS["seq_ordering"].help[:30] in " ".join(_commands()["plan"].format_help().split())


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_each_example_parses(command):
    for _, argv in EXAMPLES[command]:
        args = build_parser().parse_args(shlex.split(argv))
        assert args.command == command


def _error(capsys, argv):
    """(exit status, stderr) of a command that fails in parsing or in its checks."""
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse
        status = exc.code
    return status, capsys.readouterr().err


def test_costs_unit_bytes_points_to_sizes(tmp_path, capsys):
    status, err = _error(capsys, ["costs", "files.txt", "--unit", "bytes", "-o", str(tmp_path / "c.npz")])
    assert status == 2
    assert "bytes come from `sizes` (python -m i6_shard sizes FILE_LIST -o sizes.npz)" in err
    assert not os.listdir(tmp_path)


def test_a_file_list_as_sizes_says_to_run_sizes_or_costs_first(tmp_path, capsys):
    listing = tmp_path / "files.txt"
    listing.write_text("/data/a.hdf\n/data/b.hdf\n")
    out = tmp_path / "plan"
    argv = ["plan", "--sizes", str(listing), "--num-shards", "2", "--partition-epoch", "1", "--num-epochs", "2"]
    status, err = _error(capsys, argv + ["-o", str(out)])
    assert status == 2 and err.count("\n") == 1, err
    assert f"run `python -m i6_shard sizes {listing} -o sizes.npz` or `python -m i6_shard costs {listing}" in err
    assert not out.exists()


@pytest.mark.parametrize("size, fix", [("500", "give a unit, e.g. 500M or 500G"), ("900K", "give a unit, e.g. 800G")])
def test_a_cache_size_below_1_mb_asks_for_a_unit(tmp_path, sizes_file, capsys, size, fix):
    out = tmp_path / "plan"
    argv = ["plan", "--sizes", sizes_file[0], "--num-shards", "4", "--partition-epoch", "2", "--num-epochs", "4"]
    status, err = _error(capsys, argv + ["--ranks-per-node", "2", "--cache-size", size, "-o", str(out)])
    assert status == 2 and "less than 1 MB per node" in err and fix in err, err
    assert not out.exists()
    assert main(argv + ["--ranks-per-node", "2", "--cache-size", "500M", "-o", str(out)]) == 0
    assert "cache size           500.00 MiB per node" in capsys.readouterr().out


def test_one_cache_option_without_ranks_per_node_is_named_in_the_singular(tmp_path, sizes_file, capsys):
    argv = ["plan", "--sizes", sizes_file[0], "--num-shards", "4", "--partition-epoch", "2", "--num-epochs", "4"]
    status, err = _error(capsys, argv + ["--cache-size", "1G", "-o", str(tmp_path / "p")])
    assert status == 2 and "cache_size describes the per-node cache: give ranks_per_node too" in err
    assert core.PLAN_OPTION_DEFAULTS["ranks_per_node"] is None
