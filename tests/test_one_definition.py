"""One definition per rule and per default, and one way to make a plan: each test searches the package's source for
a rule written out again (a grep over the text or the syntax tree), and fails naming where it found it."""

import ast
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
PACKAGE = os.path.join(ROOT, "i6_shard")


def _sources():
    for folder, _, names in os.walk(PACKAGE):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), open(path, encoding="utf-8").read()


def _grep(pattern):
    """``path:line`` of every line of the package matching ``pattern`` (a regex), outside doctest output."""
    found = []
    for path, text in _sources():
        for num, line in enumerate(text.splitlines(), 1):
            if re.search(pattern, line):
                found.append(f"{path}:{num}")
    return found


def _only_in(pattern, home):
    """The lines matching ``pattern`` are all in ``home``, and there is at least one."""
    found = _grep(pattern)
    assert found, f"{pattern!r} is nowhere: the test no longer sees the rule"
    assert all(f.startswith(home + ":") for f in found), f"{pattern!r} written outside {home}: {found}"


def test_one_costs_array_check():
    """The costs array a cut takes (1-D, integer, >= 0) is checked in check_costs alone."""
    _only_in(r"must be 1-D", "i6_shard/core/pure/distribute.py")
    _only_in(r"must be integers \(bytes\), got dtype \{\w+\.dtype\}\"", "i6_shard/core/pure/distribute.py")


def test_one_rule_of_the_plan_covering_the_training():
    """Whether a plan of whole full epochs holds a sub-epoch: ``(epoch - 1) // partition_epoch`` compared with the
    plan's full epochs, in plan_covers alone."""
    _only_in(r"\(\s*[\w.]+\s*-\s*1\s*\)\s*//\s*[\w.]+\s*(<|>=|>|<=)\s*[\w.]+", "i6_shard/core/pure/epochs.py")


def test_one_rule_of_a_distributions_cut_options():
    """The options of a distribution's cut (the flexible bound) are put together in cut_options alone."""
    _only_in(r"\{\s*\"max_sub_epoch_deviation\"\s*:", "i6_shard/core/pure/cut.py")
    callers = {f.split(":")[0] for f in _grep(r"cut_options\(")}
    assert {"i6_shard/core/pure/settings.py", "i6_shard/returnn_ext/distrib_files.py"} <= callers, callers


def test_one_first_difference_of_two_key_lists():
    """ "The first entry where two key lists differ" is computed in first_difference alone."""
    _only_in(r"enumerate\(zip\(.*!=", "i6_shard/core/pure/text.py")


def test_one_archive_path_check():
    """A sizes or costs archive given by name is checked to be a .npz in check_archive_path alone, which the job,
    the builder and plan_for_returnn_config call."""
    _only_in(r"is not a \.npz file", "i6_shard/core/io/file_sizes.py")
    callers = {f.split(":")[0] for f in _grep(r"check_archive_path\(")}
    assert {
        "i6_shard/jobs/plan.py",
        "i6_shard/returnn_config/dataset.py",
        "i6_shard/returnn_config/plan.py",
    } <= callers, callers


#: Literal values that are defaults of a plan option; each is defined once, as the first of its table
#: (``SEQ_ORDERINGS``, ``DISTRIBUTIONS`` via ``CUTS``, ``REDUCE_TYPES``), and named ``DEFAULT_*``.
DEFAULT_LITERALS = {"random", "returnn", "grad"}
#: The command line's option definitions take their defaults from PLAN_OPTION_DEFAULTS in their own change.
NOT_YET: set = set()


def _default_literals(path, text):
    """``path:line`` of each of DEFAULT_LITERALS written where a default goes: a parameter's or a field's default,
    ``default=``, the fallback of ``.get``/``getattr``, a value of a dict or a default table."""
    tree = ast.parse(text, path)
    spots = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            spots += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        elif isinstance(node, ast.ClassDef):
            spots += [s.value for s in node.body if isinstance(s, ast.AnnAssign) and s.value is not None]
        elif isinstance(node, ast.Call):
            spots += [k.value for k in node.keywords if k.arg == "default"]
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "get" and len(node.args) == 2:
                spots.append(node.args[1])
            if name == "getattr" and len(node.args) == 3:
                spots.append(node.args[2])
        elif isinstance(node, ast.Dict):
            spots += node.values
        elif isinstance(node, ast.Tuple) and len(node.elts) == 3:  # (name, argument, default) tables
            spots.append(node.elts[2])
    return [f"{path}:{s.lineno}" for s in spots if isinstance(s, ast.Constant) and s.value in DEFAULT_LITERALS]


def test_each_default_is_written_once():
    found = [f for path, text in _sources() if path not in NOT_YET for f in _default_literals(path, text)]
    assert not found, f"a default written again (use PLAN_OPTION_DEFAULTS or the DEFAULT_* of its table): {found}"


def test_the_default_check_sees_a_default_written_again():
    text = 'def f(seq_ordering="random"):\n    return {}.get("distribution", "returnn")\n'
    assert _default_literals("x.py", text) == ["x.py:1", "x.py:2"]


def test_the_defaults_are_the_first_of_their_tables_and_the_plan_options_use_them():
    from i6_shard.core.pure import batching, settings
    from i6_shard.core.pure.request import PLAN_OPTION_DEFAULTS

    assert (settings.DEFAULT_SEQ_ORDERING, settings.DEFAULT_DISTRIBUTION, batching.DEFAULT_REDUCE_TYPE) == (
        "random",
        "returnn",
        "grad",
    )
    fields = settings.PlanSettings(num_shards=1, partition_epoch=1)
    assert PLAN_OPTION_DEFAULTS["seq_ordering"] == fields.seq_ordering == settings.DEFAULT_SEQ_ORDERING
    assert PLAN_OPTION_DEFAULTS["distribution"] == fields.distribution == settings.DEFAULT_DISTRIBUTION
    assert PLAN_OPTION_DEFAULTS["reduce_type"] == batching.SyncMode().reduce_type == batching.DEFAULT_REDUCE_TYPE
    assert PLAN_OPTION_DEFAULTS["max_sub_epoch_deviation"] == fields.max_sub_epoch_deviation
    assert PLAN_OPTION_DEFAULTS["random_seed_offset"] is None  # RETURNN's 0; None and 0 hash as one job


def test_the_plan_option_table_holds_every_option_of_the_request():
    """from_options takes the three counts and exactly the table's options; a name outside it is refused."""
    import inspect

    from i6_shard.core import PLAN_OPTION_DEFAULTS, PlanRequest

    request = PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=3, **PLAN_OPTION_DEFAULTS)
    assert request == PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=3)
    params = inspect.signature(PlanRequest.from_options).parameters
    assert [n for n, p in params.items() if p.kind == p.KEYWORD_ONLY] == ["num_shards", "partition_epoch", "num_epochs"]
    with pytest.raises(TypeError, match=r"unknown plan options \['seed'\]"):
        PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=3, seed=1)


#: Constructors of the plan and its settings; outside the core (and the tests) a plan is made on the planning floor
#: from a request built by PlanRequest.from_options.
_CONSTRUCTORS = {"ShardPlan", "PlanSettings", "PlanRequest"}


def _constructed(path, text):
    out = []
    for node in ast.walk(ast.parse(text, path)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in _CONSTRUCTORS:
            out.append(f"{path}:{node.lineno} {name}(")
        elif name in ("from_mode", "replace") and isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else getattr(func.value, "attr", "")
            if owner in _CONSTRUCTORS:
                out.append(f"{path}:{node.lineno} {owner}.{name}(")
    return out


def test_no_plan_or_settings_is_constructed_outside_the_core():
    found = [f for path, text in _sources() if not path.startswith("i6_shard/core/") for f in _constructed(path, text)]
    assert not found, f"plans made outside the planning floor (use PlanRequest.from_options and core.planning): {found}"


def test_the_constructor_check_sees_each_form():
    text = "ShardPlan(k, c, s)\ncore.PlanSettings(num_shards=1)\nPlanSettings.from_mode(sharding='sharded')\n"
    assert _constructed("x.py", text) == ["x.py:1 ShardPlan(", "x.py:2 PlanSettings(", "x.py:3 PlanSettings.from_mode("]


def test_one_rule_of_dataloader_workers_that_each_read_all_of_the_data():
    """DataLoader workers that do not shard, each reading all of a rank's data, are said by
    duplicate_workers_problem alone: the reader's context (the checks and the plan read it there) and the RETURNN-side
    dataset call it."""
    _only_in(r"DataLoader workers of a rank reads all", "i6_shard/returnn_config/reader/rules.py")
    callers = {f.split(":")[0] for f in _grep(r"duplicate_workers_problem\(")}
    assert {"i6_shard/returnn_config/reader/context.py", "i6_shard/returnn_ext/distrib_files.py"} <= callers, callers
