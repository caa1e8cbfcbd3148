"""The one table of plan options (core.PLAN_OPTIONS) is what the command line, ShardPlanJob's signature and hash
rules and docs/cli.md are built from: a row added to a copy of it shows up in each, and neither cli.py nor
jobs/plan.py names an option of its own."""

import inspect
import io
import os
import re
import tokenize
from types import MappingProxyType

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import Job, tk  # noqa: E402

from i6_shard import cli, core  # noqa: E402
from i6_shard.core.pure import PlanOption  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402
from i6_shard.jobs import plan as plan_module  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ROW = PlanOption(
    "shuffle_buffer",
    "Optional[int]",
    "files each rank holds ahead of its reader (a row added in a test)",
    metavar="N",
    parse=int,
    commands={"plan": None, "demo": None},
)


def _table_with_a_row():
    return MappingProxyType({**core.PLAN_OPTIONS, _ROW.name: _ROW})


def test_a_row_added_to_the_table_is_in_the_command_line_and_its_docs(monkeypatch):
    monkeypatch.setattr(cli, "PLAN_OPTIONS", _table_with_a_row())
    for command in ("plan", "demo"):
        parser = next(a for a in cli.build_parser()._actions if a.dest == "command").choices[command]
        text = " ".join(parser.format_help().split())
        assert "--shuffle-buffer N files each rank holds ahead of its reader (a row added in a test)" in text
        assert "| `--shuffle-buffer N` | files each rank holds ahead of its reader" in cli.options_markdown(command)
    argv = ["plan", "--sizes", "/s.npz", "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4"]
    args = cli.build_parser().parse_args(argv + ["--shuffle-buffer", "7", "-o", "p"])
    assert cli._table_options(args)["shuffle_buffer"] == 7  # what the command passes to PlanRequest.from_options
    assert "shuffle_buffer" not in cli._table_options(cli.build_parser().parse_args(["train-report", "x", "-o", "o"]))


def test_a_row_added_to_the_table_is_in_the_jobs_signature_and_hash_rules(work_dir):
    table = _table_with_a_row()
    signature = plan_module.job_signature(table)
    param = signature.parameters["shuffle_buffer"]
    assert (param.kind, param.default, param.annotation) == (param.KEYWORD_ONLY, None, "Optional[int]")
    assert ":param shuffle_buffer: files each rank holds ahead" in plan_module.job_docstring(table)
    exclude = plan_module.hash_exclude(table)
    assert exclude["shuffle_buffer"] is None  # added later: at its default it hashes as absent, old ids stay

    class JobWithTheRow(Job):
        __sis_hash_exclude__ = exclude

    args = {"file_sizes": tk.Path("/data/s.npz"), "num_shards": 2, "partition_epoch": 2, "num_epochs": 4}
    assert JobWithTheRow.hash({**args, "shuffle_buffer": None}) == JobWithTheRow.hash(args)
    assert JobWithTheRow.hash({**args, "shuffle_buffer": 8}) != JobWithTheRow.hash(args)


def test_the_jobs_signature_is_the_tables():
    """ShardPlanJob's signature (which Sisyphus binds arguments to, and help() shows) is the table's: every option
    by keyword with its default, nothing else besides file_sizes and the job's own arguments."""
    signature = inspect.signature(ShardPlanJob.__init__)
    assert signature == plan_module.job_signature(core.PLAN_OPTIONS)
    names = [n for n in signature.parameters if n not in ("self", "file_sizes")]
    assert names == [*core.PLAN_OPTIONS, "plot", "time_rqmt", "mem_rqmt", "cpu_rqmt"]
    for name, option in core.PLAN_OPTIONS.items():
        param = signature.parameters[name]
        assert param.kind == param.KEYWORD_ONLY and (param.default is param.empty) == option.required, name
        if not option.required:
            assert param.default == option.default, name
        assert f":param {name}: {option.help}" in ShardPlanJob.__init__.__doc__
    with pytest.raises(TypeError, match="shuffle_buffer"):
        ShardPlanJob(tk.Path("/data/s.npz"), num_shards=2, partition_epoch=2, num_epochs=4, shuffle_buffer=3)


def named_options(text: str) -> list:
    """The optional plan options that Python source ``text`` names in its code: as a name (a variable, an attribute,
    a keyword) or as a string literal of exactly the name; prose in docstrings, help and examples is no naming."""
    names = set(core.PLAN_OPTION_DEFAULTS)
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME and token.string in names:
            found.add(token.string)
        elif token.type == tokenize.STRING and re.sub(r"^[a-zA-Z]*(['\"])(.*)\1$", r"\2", token.string) in names:
            found.add(re.sub(r"^[a-zA-Z]*(['\"])(.*)\1$", r"\2", token.string))
    return sorted(found)


def test_the_command_line_and_the_job_name_no_plan_option():
    """An option is named in its row and where it is used (core), never in the generic layers above."""
    for rel in ("i6_shard/cli.py", "i6_shard/jobs/plan.py"):
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            named = named_options(f.read())
        assert not named, f"{rel} names the plan options {named}: read them from core.PLAN_OPTIONS"


def test_the_check_sees_an_option_named():
    assert named_options('x = args.cache_size\nif "batch_size" in d: f(lengths=1)\n') == [
        "batch_size",
        "cache_size",
        "lengths",
    ]
    assert named_options('"""the batch_size of RETURNN"""\nhelp = "--batch-size N: sequence lengths"\n') == []
