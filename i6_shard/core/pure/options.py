"""The one table of plan options: each option's type, default, help, hash rule and command-line flags, written once;
``PlanRequest.from_options``, the command line, ``ShardPlanJob`` (signature, hash, attributes) and docs/cli.md read it."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .args import check_bool, check_int, check_optional_int
from .batching import DEFAULT_REDUCE_TYPE, REDUCE_TYPES
from .cache import DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS, check_preload_next_n_sub_epochs, parse_bytes
from .engine_sim import UNKNOWN_SEQ_ORDERING
from .flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION
from .settings import (
    DEFAULT_DISTRIBUTION,
    DEFAULT_SEQ_ORDERING,
    DISTRIBUTIONS,
    OFFERED_DISTRIBUTIONS,
    SEQ_ORDERINGS,
    sharding_mode,
)
from .corpora import exact_weight, weight_text
from .returnn_features import MIN_RETURNN_VERSION, returnn_version_key
from .text import short_repr

__all__ = ["PLAN_OPTIONS", "PlanOption"]


@dataclass(frozen=True)
class CliFlag:
    """One command-line flag of a plan option (argparse's ``add_argument``).

    :ivar flag: e.g. ``"--seq-ordering"``; a flag that takes a value stores it under the option's name, one with an
        ``action`` under its own (:attr:`dest`), which the option's ``cli_value`` reads
    :ivar help: the flag's own help (a flag such as ``--no-cached-file`` that states one value); None: the option's
    :ivar action: argparse's action (``"store_true"``), or None: the flag takes a value
    """

    flag: str
    help: Optional[str] = None
    action: Optional[str] = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class PlanOption:
    """A plan option: one row of :data:`PLAN_OPTIONS`.

    :ivar name: its keyword in ``PlanRequest.from_options`` and ``ShardPlanJob`` (also the request field where
        ``path`` is set)
    :ivar annotation: its type as ``ShardPlanJob``'s signature shows it
    :ivar help: what it means, in one line: the command line's help (with the default), the job's docstring
    :ivar default: its value where it is not given (None: not given); ``required`` options have none
    :ivar required: the three counts every plan needs
    :ivar check: its rule where it is one of the value alone: the value checked (a ``TypeError``/``ValueError``
        names it and the fix) and made plain; None: the settings, batching or sync it builds check it
    :ivar none_means: what an option left out (None) means, where that is a value (RETURNN's default)
    :ivar read: its plain value as a request holds it (the job's attribute and, at its default, what it hashes)
    :ivar hash_read: where the job hashes another value than ``read`` (None: ``read``'s)
    :ivar hashed_at_default: hashed also at its default (an option of the first jobs); False: added later, at its
        default it hashes as absent so that the jobs made before it keep their ids (``__sis_hash_exclude__``)
    :ivar keeps_none: None (not given) stays None in the job and its hash, where ``read`` would give the default
    :ivar path: an input file the job reads where it runs (kept and hashed as given): what makes it, for errors
    :ivar engine: the training's config decides it through RETURNN's engine (set or not)
    :ivar batching: it sets the batching the prediction simulates, which needs per-sequence lengths
    :ivar cut: it names the distribution the bins are cut with (a row of ``CUTS``), which a training's plan chooses
        where none is given (``ShardPlanJob.for_training``, :func:`~.cut.training_distribution`)
    :ivar flags: its command-line flags (empty: one, ``--name-with-dashes``)
    :ivar choices: the values the command line accepts; ``offered``: those its help shows (None: all)
    :ivar hidden: the command line accepts it but its help does not show it (read where an earlier version's plan
        or recipe gives it)
    :ivar metavar: the command line's name of its value (``N``, ``SIZE``)
    :ivar parse: the command line's reading of the value's text (a ``ValueError`` names the fix); None: ``str``
    :ivar cli_value: the option from its flags' parsed values by dest, at the command (a ``ValueError`` names the fix)
    :ivar commands: the commands that take it, each with its own help there or None (the option's)
    :ivar command_defaults: a required option's default in a command where it is optional (``demo``)
    :ivar doc: its meaning in docs/cli.md (markdown); None: ``help``
    """

    name: str
    annotation: str
    help: str
    default: Any = None
    required: bool = False
    check: Optional[Callable[[Any], Any]] = None
    none_means: Any = None
    read: Callable[[Any], Any] = lambda request: None
    hash_read: Optional[Callable[[Any], Any]] = None
    hashed_at_default: bool = False
    keeps_none: bool = False
    path: Optional[str] = None
    engine: bool = False
    batching: bool = False
    cut: bool = False
    flags: Tuple[CliFlag, ...] = ()
    choices: Optional[Tuple[Any, ...]] = None
    offered: Optional[Tuple[Any, ...]] = None
    hidden: bool = False
    metavar: Optional[str] = None
    parse: Optional[Callable[[str], Any]] = None
    cli_value: Optional[Callable[[Mapping[str, Any]], Any]] = None
    commands: Mapping[str, Optional[str]] = field(default_factory=lambda: {"plan": None})
    command_defaults: Mapping[str, Any] = field(default_factory=dict)
    doc: Optional[str] = None

    @property
    def cli_flags(self) -> Tuple[CliFlag, ...]:
        return self.flags or (CliFlag("--" + self.name.replace("_", "-")),)

    def value_from_cli(self, values: Mapping[str, Any]) -> Any:
        """The option from the parsed command line (``values``: argparse's namespace as a dict)."""
        if self.cli_value is not None:
            return self.cli_value(values)
        return values.get(self.cli_flags[0].dest)


def _literal(text: str) -> Any:
    """A config value written as a Python literal or JSON."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):  # (JSON below names what is wrong)
        pass
    try:
        return json.loads(text)
    except RecursionError:  # nested too deep to be a config value
        raise ValueError(
            f"nests dicts and lists too deep to read ({len(text)} characters): write it as in the config, e.g. "
            "\"{'reduce_type': 'param', 'param_sync_step': 100}\""
        ) from None
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a Python literal nor JSON: write it as in the config, e.g. "
            "\"{'reduce_type': 'param', 'param_sync_step': 100}\""
        ) from None


def _reasons(value: Any) -> Tuple[str, ...]:
    """The reasons of ``engine_inexact``: a list or tuple of non-empty str, as a tuple.

    >>> _reasons(["several DataLoader workers"])
    ('several DataLoader workers',)
    """
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, str) and r for r in value):
        raise TypeError(
            f"engine_inexact={short_repr(value, limit=120)}: give a list of reasons (non-empty str), each saying what "
            "the training does that the simulation does not mirror, or None"
        )
    return tuple(value)


def _int_or_dict(text: str) -> Any:
    """``max_seq_length`` as written in the config: an int, or a dict by data key."""
    value = _literal(text)
    if isinstance(value, bool) or not isinstance(value, (int, dict)):
        raise ValueError(f"{text!r} is not an int or a dict by data key such as '{{\"data\": 400}}'")
    return value


def _bytes(flag: str, *, what: str, minimum: int = 0) -> Callable[[Mapping[str, Any]], Optional[int]]:
    """The value of a byte-count flag (``800G``); below ``minimum`` (a missing unit, most likely) it asks for one."""

    def value(values: Mapping[str, Any]) -> Optional[int]:
        text = values.get(flag.lstrip("-").replace("-", "_"))
        if text is None:
            return None
        num_bytes = parse_bytes(text, what=what)
        if num_bytes < minimum:
            text = str(text).strip()
            example = f"{text}M or {text}G" if text.isdigit() else "800G"
            raise ValueError(
                f"{flag} {text!r} is {num_bytes:,} bytes, less than 1 MB per node; give a unit, e.g. {example} "
                "(a bare number counts bytes)"
            )
        return num_bytes

    return value


def check_by_key(value: Any, *, name: str, hint: str) -> Any:
    """``value`` if None, a positive int or a non-empty dict of data keys (str) to positive ints, else a
    ``TypeError``/``ValueError`` naming it and the fix.

    >>> check_by_key({"data": 400}, name="max_seq_length", hint="frames")
    {'data': 400}
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        return check_int(value, name=name, minimum=1, hint=hint + ", or a dict by data key")
    if not value:
        raise ValueError(f"{name}={{}} names no data key: give an int ({hint}) or a dict by data key, or None")
    out = {}
    for key, limit in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{name}={short_repr(value, limit=120)}: the key {key!r} is not a data key (str)")
        out[key] = check_int(limit, name=f"{name}[{key!r}]", minimum=1, hint=hint)
    return out


def _text_list(text: str) -> Tuple[str, ...]:
    """A comma-separated list as written on the command line (``1,2.5``)."""
    return tuple(part.strip() for part in str(text).split(","))


def _listed(value: Any, *, name: str) -> Tuple[Any, ...]:
    """A list option: a list or tuple as given, or a comma-separated str; refused if empty."""
    items = _text_list(value) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise TypeError(f"{name}={short_repr(value)}: give one value per corpus, as a list or as 'a,b'")
    return tuple(items)


def _check_weights(value: Any) -> Tuple[str, ...]:
    """The weights, one per corpus, as exact texts (``2.5``, ``1/3``): each a number >= 0.

    >>> _check_weights([1, 2.5]), _check_weights("1, 0.5")
    (('1', '2.5'), ('1', '0.5'))
    """
    items = _listed(value, name="weights")
    return tuple(weight_text(exact_weight(w, name=f"weights[{i}]")) for i, w in enumerate(items))


def _check_corpus_names(value: Any) -> Tuple[str, ...]:
    """The corpus names, one per corpus: non-empty strs."""
    items = _listed(value, name="corpus_names")
    bad = next((n for n in items if not isinstance(n, str) or not n.strip()), None)
    if bad is not None:
        raise ValueError(f"corpus_names={short_repr(value)}: the name {short_repr(bad)} is not a non-empty str")
    return tuple(n.strip() for n in items)


def check_returnn_version(value: Any) -> str:
    """A RETURNN release's version (``returnn.__version__``, ``1.YYYYMMDD.HHMMSS``) as given, once it is one that
    i6_shard supports (from :data:`~.returnn_features.MIN_RETURNN_VERSION` on).

    >>> check_returnn_version("1.20240620.64807")
    '1.20240620.64807'
    """
    if not isinstance(value, str):
        raise TypeError(
            f"returnn_version={value!r} has type {type(value).__name__}; give the training's RETURNN version as a "
            "str, e.g. '1.20240620.64807' (returnn.__version__), or None for the newest release"
        )
    try:
        key = returnn_version_key(value)
    except ValueError as exc:
        raise ValueError(f"returnn_version: {exc}, or None for the newest release") from None
    if key < returnn_version_key(MIN_RETURNN_VERSION):
        raise ValueError(
            f"returnn_version={value!r} is older than {MIN_RETURNN_VERSION}, the first RETURNN whose "
            "DistributeFilesDataset has distrib_shard_files: give a release from then on"
        )
    return value.strip()


def _settings(name: str) -> Callable[[Any], Any]:
    return lambda request: getattr(request.settings, name)


def _node_cache(name: str, *, unused: Any = None) -> Callable[[Any], Any]:
    """The node cache's ``name``, or ``unused`` without a node cache."""
    return lambda request: unused if request.node_cache is None else getattr(request.node_cache, name)


def _batching(name: str) -> Callable[[Any], Any]:
    return lambda request: None if request.batching is None else getattr(request.batching, name)


_PLAN = {"plan": None}
_PLAN_DEMO = {"plan": None, "demo": None}
_SYNC_COMMANDS = {"plan": None, "train-report": None}

_ROWS = (
    PlanOption(
        "num_shards",
        "int",
        "ranks that shard the files (distributed world size)",
        required=True,
        read=_settings("num_shards"),
        metavar="N",
        parse=int,
        hashed_at_default=True,
        commands=_PLAN_DEMO,
        command_defaults={"demo": 4},
    ),
    PlanOption(
        "partition_epoch",
        "int",
        "sub-epochs per full epoch",
        required=True,
        read=_settings("partition_epoch"),
        metavar="N",
        parse=int,
        hashed_at_default=True,
        commands=_PLAN_DEMO,
        command_defaults={"demo": 4},
    ),
    PlanOption(
        "num_epochs",
        "int",
        "the training's num_epochs, counted in sub-epochs; the plan also holds the preload_next_n_sub_epochs "
        "sub-epochs RETURNN loads after the last",
        required=True,
        read=_settings("training_num_epochs"),
        metavar="N",
        parse=int,
        # hashed with the preloaded sub-epochs: as an earlier ShardPlanJob given their sum, so that a recipe that
        # added them itself keeps its job ids by dropping them
        hash_read=_settings("num_epochs"),
        hashed_at_default=True,
        commands=_PLAN_DEMO,
        command_defaults={"demo": 12},
        doc="the training's `num_epochs`, counted in sub-epochs; the plan also holds the "
        "`--preload-next-n-sub-epochs` sub-epochs RETURNN loads after the last",
    ),
    PlanOption(
        "seq_ordering",
        "str",
        "the sub-epoch dataset's seq_ordering as the plan's shuffle of the files sees it: random (RETURNN shuffles "
        "the files anew every full epoch) or default (the list's order, the same bins every full epoch)",
        default=DEFAULT_SEQ_ORDERING,
        read=_settings("seq_ordering"),
        hashed_at_default=True,
        choices=SEQ_ORDERINGS,
        commands=_PLAN_DEMO,
    ),
    PlanOption(
        "random_seed_offset",
        "Optional[int]",
        "sharded: the dataset's random_seed_offset, or else the config's dataset_random_seed_offset (RETURNN's "
        "default 0); unsharded: the config's dataset_random_seed_offset, to which RETURNN adds rank*16127 on each "
        "rank (with the same seed on all ranks: the dataset's random_seed_offset)",
        none_means=0,
        read=lambda request: request.settings.random_seed_offset or None,  # None and 0: one job
        hashed_at_default=True,
        metavar="N",
        parse=int,
        commands=_PLAN_DEMO,
        doc="sharded: the dataset's `random_seed_offset`, or else the config's `dataset_random_seed_offset` "
        "(default 0); with `--unsharded`: the config's `dataset_random_seed_offset`, to which RETURNN adds "
        "`rank * 16127` on each rank (with `--same-seed-on-all-ranks`: the dataset's `random_seed_offset`)",
    ),
    PlanOption(
        "fixed_random_seed",
        "Optional[int]",
        "the dataset's fixed_random_seed (the same shuffle every full epoch)",
        read=_settings("fixed_random_seed"),
        hashed_at_default=True,
        metavar="N",
        parse=int,
        commands=_PLAN_DEMO,
        doc="the dataset's `fixed_random_seed` (the seed of every full epoch on every rank; offsets are then "
        "ignored, as in RETURNN)",
    ),
    PlanOption(
        "sharding",
        "str",
        "sharded (distrib_shard_files=True), unsharded (every rank shuffles all files itself) or "
        "unsharded_same_seed (unsharded, the same seed on every rank)",
        default="sharded",
        read=_settings("sharding"),
        flags=(
            CliFlag(
                "--unsharded",
                help="model distrib_shard_files=False: every rank shuffles all files itself, with seed offset "
                "random_seed_offset + rank*16127",
                action="store_true",
            ),
            CliFlag(
                "--same-seed-on-all-ranks",
                help="with --unsharded: the dataset dict sets random_seed_offset itself, which RETURNN uses "
                "unchanged on every rank, so all ranks read the same files (the report shows the overlap)",
                action="store_true",
            ),
        ),
        cli_value=lambda values: sharding_mode(
            distrib_shard_files=not values.get("unsharded"),
            same_seed_on_all_ranks=bool(values.get("same_seed_on_all_ranks")),
        ),
        commands=_PLAN_DEMO,
        doc="`--unsharded` models `distrib_shard_files=False`, where each rank shuffles the whole list with its own "
        "offset `random_seed_offset + rank * 16127`, as RETURNN sets it under `torch_distributed`; with it, "
        "`--same-seed-on-all-ranks`: the dataset dict sets `random_seed_offset` itself, which RETURNN uses "
        "unchanged on every rank, so all ranks read the same files; the report warns and shows the overlap",
    ),
    PlanOption(
        "distribution",
        "str",
        "how bins are cut: returnn (RETURNN's own cut, for comparison and parity), balanced (when the training's "
        "batching is not known) or equal_steps (where it is: files moved between the ranks of each sub-epoch "
        "until the simulated training's ranks make equal steps; sharded, needs a costs archive with per-sequence "
        "lengths and the batching)",
        default=DEFAULT_DISTRIBUTION,
        read=_settings("distribution"),
        cut=True,
        choices=DISTRIBUTIONS,
        offered=OFFERED_DISTRIBUTIONS,
        commands=_PLAN_DEMO,
        doc="how the bins are cut: `returnn` is what `DistributeFilesDataset` does, for comparison and "
        "parity; `balanced` ([balanced_split.md](balanced_split.md)) where the training's batching is not known; "
        "`equal_steps` where it is: files moved between the ranks of each sub-epoch until the simulated "
        "training's ranks make equal steps (sharded only; needs a costs archive with per-sequence lengths, as "
        "`--sizes` or `--lengths`, and `--batch-size`/`--max-seqs`; progress lines on stderr). The names of "
        "earlier versions' distributions are still accepted, so that their plan files and recipes still run",
    ),
    PlanOption(
        "max_sub_epoch_deviation",
        "float",
        "how far a sub-epoch's size may be from the mean sub-epoch's, as a share of it, in [0, 1): equal_steps moves "
        "files between sub-epochs only within it (the default 0.25 leaves it free to choose, up to 0.9); 0.1 keeps "
        "sub-epochs within 10% and drops where it must",
        default=DEFAULT_MAX_SUB_EPOCH_DEVIATION,
        read=_settings("max_sub_epoch_deviation"),
        metavar="D",
        parse=float,
        commands=_PLAN_DEMO,
        doc="the most a sub-epoch's size may be off the mean sub-epoch's: `equal_steps` moves files between "
        "sub-epochs only within it, and the report says what it gave up where zero drop and the bound cannot both "
        "hold ([rechunk.md](rechunk.md)); the default (0.25) leaves it free to choose, up to 0.9; also the bound "
        "of the distributions of earlier versions that take one",
    ),
    PlanOption(
        "weights",
        "Optional[Sequence[Union[int, float, str]]]",
        "one weight per corpus (per --sizes archive, in their order), e.g. 1,2.5: a full epoch reads a corpus "
        "weight x its files times, every file the integer part, the fraction rotating through the files over the "
        "full epochs, never a file twice in one sub-epoch (sharded only); default: each file once",
        check=_check_weights,
        read=lambda request: request.weights,
        metavar="W,W,...",
        parse=_text_list,
        doc="one weight per corpus, in the order of the `--sizes` archives (`1,2.5`; decimals and `p/q` are exact): "
        "a full epoch reads a corpus weight x its files times: each of its files the weight's integer part, and "
        "the fraction rotating through its files, so that over the full epochs every file is read equally often "
        "(±1); no sub-epoch reads a file twice ([corpora.md](corpora.md)); refused: a weight < 0, a file in two "
        "corpora, a weight that leaves a corpus no file in some full epoch, a weight above `--partition-epoch`",
    ),
    PlanOption(
        "corpus_names",
        "Optional[Sequence[str]]",
        "one name per corpus (per --sizes archive), e.g. A,B; default: the archives' stems",
        check=_check_corpus_names,
        read=lambda request: request.corpus_names,
        metavar="NAME,NAME,...",
        parse=_text_list,
        doc="one name per corpus, in the order of the `--sizes` archives (default: the archives' file names "
        "without `.npz`, or `corpus0`, `corpus1`, ... where those repeat); `summary.json`'s `corpora` and the "
        "report name them",
    ),
    PlanOption(
        "batch_size",
        "Optional[Union[int, Dict[str, int]]]",
        "RETURNN's batch_size in frames: predict the loss under its batching (needs a costs archive)",
        # a dict by data key as given (its smallest limit, which the statistical model takes, is another job's)
        read=lambda request: request.batch_size_by_key or _batching("batch_size")(request),
        engine=True,
        batching=True,
        metavar="N",
        parse=int,
        commands={"plan": None, "costs": "--unit steps: RETURNN's batch_size in frames (padding included)"},
        doc="RETURNN's `batch_size`: predict the loss under its batching (`dropped_fraction_predicted`; needs a "
        "costs archive as `--sizes` or `--lengths`)",
    ),
    PlanOption(
        "max_seqs",
        "Optional[int]",
        "RETURNN's max_seqs, for the prediction",
        read=_batching("max_seqs"),
        engine=True,
        batching=True,
        metavar="N",
        parse=int,
        commands={"plan": None, "costs": "--unit steps: RETURNN's max_seqs"},
    ),
    PlanOption(
        "lengths",
        "Optional[str]",
        "a costs archive (`costs`, ComputeFileCostsJob) of the same files in the same order: the prediction takes "
        "its sequence lengths, the bins are still cut by the sizes archive (e.g. one in bytes, as RETURNN cuts a "
        "plain DistributeFilesDataset); needs batch_size or max_seqs",
        read=lambda request: request.lengths,
        path="ComputeFileCostsJob(...).out_file_costs or the .npz of `python -m i6_shard costs`",
        metavar="COSTS_NPZ",
        commands={
            "plan": None,
            "report": "with --verify of a distribution equal_steps plan: the costs archive it was planned from (its "
            "bins are cut with the files' sequence lengths, which the plan file does not hold, under the engine "
            "settings it records; other files are refused, naming the first differing key)",
        },
        doc="a costs archive (from `costs` or `ComputeFileCostsJob`) of the same files in the same order: the "
        "prediction takes its sequence lengths while the bins are still cut by `--sizes` (e.g. a sizes archive in "
        "bytes, as RETURNN cuts a plain `DistributeFilesDataset`); other files or another order are refused, "
        "naming both archives and the first differing entry; `summary.json` names it as `lengths_from`; needs "
        "`--batch-size` or `--max-seqs`",
    ),
    PlanOption(
        "reduce_type",
        "str",
        "torch_distributed's reduce_type, which the predicted loss and steps assume: grad (every rank stops in the "
        "step the first runs out) or param (the others run on to their next sync)",
        default=DEFAULT_REDUCE_TYPE,
        read=lambda request: request.sync.reduce_type,
        engine=True,
        choices=REDUCE_TYPES,
        commands=_SYNC_COMMANDS,
        doc="the training's `torch_distributed` `reduce_type`, which the predicted loss and steps assume: `grad` "
        "stops every rank in the step the first runs out, `param` lets the others run on to their next "
        "sync; `summary.json`'s `sync` and the report name it ([units.md](units.md))",
    ),
    PlanOption(
        "param_sync_step",
        "Optional[int]",
        "with reduce_type param: torch_distributed's param_sync_step (steps between param syncs)",
        read=lambda request: request.sync.param_sync_step,
        engine=True,
        metavar="N",
        parse=int,
        commands=_SYNC_COMMANDS,
    ),
    PlanOption(
        "accum_grad_multiple_step",
        "Optional[int]",
        "the config's accum_grad_multiple_step (steps per optimizer update; default 1): param syncs come every "
        "param_sync_step updates",
        none_means=1,
        read=lambda request: (
            None if request.sync.accum_grad_multiple_step == 1 else request.sync.accum_grad_multiple_step
        ),
        engine=True,
        metavar="N",
        parse=int,
        commands=_SYNC_COMMANDS,
        doc="the config's `accum_grad_multiple_step` (default 1): the param syncs come every `param_sync_step` "
        "optimizer updates, i.e. every `N * param_sync_step` steps, and the exact simulation accumulates as the "
        "training does ([units.md](units.md#exact-steps-the-simulated-engine))",
    ),
    PlanOption(
        "torch_distributed",
        "Optional[Dict[str, Any]]",
        "the config's torch_distributed as written there (a dict, sync levels included): the simulated steps and "
        "the predicted loss assume its sync; reduce_type / param_sync_step, if given too, must say the same (on "
        "the command line a Python dict literal or JSON, e.g. \"{'reduce_type': 'param', 'param_sync_step': 100}\")",
        read=lambda request: request.torch_distributed,
        engine=True,
        metavar="DICT",
        parse=_literal,
        doc="the config's `torch_distributed` as written there (a Python dict literal or JSON, sync levels "
        "included), checked as RETURNN checks it at start-up: the exact simulation takes its sync; "
        "`--reduce-type`/`--param-sync-step`, if given too, must say the same",
    ),
    PlanOption(
        "max_seq_length",
        "Optional[Union[int, Dict[str, int]]]",
        "the config's max_seq_length (an int, or a dict by data key, e.g. 2000 or \"{'data': 2000}\"): the "
        "simulation drops the sequences RETURNN's length filter drops (a dict naming several data keys: not "
        "simulated exactly, the costs archive holds one key's lengths)",
        check=lambda value: check_by_key(value, name="max_seq_length", hint="the longest sequence kept, in frames"),
        read=lambda request: request.max_seq_length,
        engine=True,
        metavar="INT_OR_DICT",
        parse=_int_or_dict,
        commands={
            "plan": None,
            "train-report": "the training's max_seq_length (an int, or a dict by data key such as '{\"data\": "
            "400}'): its removals are shown apart from the dropped share",
        },
    ),
    PlanOption(
        "sub_epoch_seq_ordering",
        "str",
        "the seq_ordering of the sub-epoch dataset (an HDFDataset's; RETURNN's get_seq_order_for_epoch, e.g. "
        "random, default, sorted_reverse, laplace:.100), in which each rank's sequences batch: the simulation "
        f"mirrors it ({UNKNOWN_SEQ_ORDERING!r}: not known, so the plan says it is not exact)",
        default=DEFAULT_SEQ_ORDERING,
        read=lambda request: request.sub_epoch_seq_ordering,
        engine=True,
        metavar="ORDER",
        doc="the sub-epoch dataset's `seq_ordering` (an HDFDataset's: `random`, the default, `default`, "
        "`sorted_reverse`, `laplace:.100`, ...): the exact simulation orders each rank's sequences as RETURNN's "
        "`get_seq_order_for_epoch` does before they batch; `unknown` says the order is not known, and the plan then "
        "says it is not exact; a value RETURNN fails on is refused, naming it",
    ),
    PlanOption(
        "engine_inexact",
        "Optional[Tuple[str, ...]]",
        "what the training does to the sequences that the simulation does not mirror (the config reader's reasons: "
        "a PostprocessingDataset that may change them, several DataLoader workers interleaving their batches): the "
        "plan then says it is not exact, naming each",
        check=_reasons,
        read=lambda request: request.engine_inexact or None,
        engine=True,
        hidden=True,
        metavar="REASONS",
        parse=_literal,
        doc="what the training does that the simulation does not mirror, as `ShardPlanJob.for_training` reads it "
        "from the config (a Python list of reasons); the plan then says it is not exact, naming each",
    ),
    PlanOption(
        "ranks_per_node",
        "Optional[int]",
        "ranks (GPUs) per node: report the bytes each node's file cache must hold at once per sub-epoch and the "
        "reads from the shared file system (cache_peak_bytes_per_node in summary.json)",
        read=_node_cache("ranks_per_node"),
        metavar="N",
        parse=int,
        doc="add the per-node file cache footprint: `cache_peak_bytes_per_node` and `cache` in `summary.json`, a "
        "section in the report, a panel in the plot ([cluster.md](cluster.md#how-much-local-cache-a-node-needs))",
    ),
    PlanOption(
        "preload_next_n_sub_epochs",
        "Optional[int]",
        f"the dataset's preload_next_n_sub_epochs (RETURNN's default {DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS} with "
        "use_worker_proc=True; 0 with use_worker_proc=False): the plan holds these sub-epochs after the training's "
        "last, and with ranks_per_node the node cache holds them",
        check=check_preload_next_n_sub_epochs,
        read=_settings("preloaded_sub_epochs"),
        keeps_none=True,
        metavar="N",
        parse=int,
    ),
    PlanOption(
        "cached_file",
        "bool",
        "get_sub_epoch_dataset wraps the files in CachedFile (else every rank reads from the shared file system "
        "and the node caches nothing)",
        default=True,
        check=lambda value: check_bool(value, name="cached_file"),
        read=_node_cache("cached_file", unused=True),
        flags=(
            CliFlag(
                "--no-cached-file",
                help="get_sub_epoch_dataset does not wrap the files in CachedFile: every rank reads from the "
                "shared file system and the node caches nothing",
                action="store_true",
            ),
        ),
        cli_value=lambda values: not values.get("no_cached_file"),
        doc="with `--ranks-per-node`: the files are not wrapped in `CachedFile`; each rank reads from the shared "
        "file system",
    ),
    PlanOption(
        "cache_size",
        "Optional[int]",
        "bytes of each node's local cache (with ranks_per_node): say whether the plan fits and which "
        "partition_epoch values do; e.g. 800G or 1.5TiB, at least 1 MB",
        check=lambda value: check_optional_int(
            value, name="cache_size", minimum=1, hint="bytes of file cache per node, or None"
        ),
        read=lambda request: request.cache_size,
        metavar="SIZE",
        cli_value=_bytes("--cache-size", what="cache size", minimum=10**6),
        doc="with `--ranks-per-node`: each node's cache (`800G`, `1.5TiB`, `800GB`); the report says whether the "
        "plan fits and which `partition_epoch` values do",
    ),
    PlanOption(
        "sub_epoch_constant_bytes",
        "Optional[int]",
        "with ranks_per_node: bytes of the files the sub-epoch dataset reads in every sub-epoch besides its bin's "
        "(e.g. 20G): the node cache holds them in every sub-epoch",
        check=lambda value: check_optional_int(
            value,
            name="sub_epoch_constant_bytes",
            minimum=0,
            hint="bytes of the files the sub-epoch dataset reads in every sub-epoch",
        ),
        read=lambda request: None if request.node_cache is None else request.node_cache.constant_bytes or None,
        metavar="SIZE",
        cli_value=_bytes("--sub-epoch-constant-bytes", what="--sub-epoch-constant-bytes"),
        doc="with `--ranks-per-node`: bytes of the files the sub-epoch dataset reads in every sub-epoch besides "
        "its bin's (the template's own files, e.g. `20G`): the node cache holds them in every sub-epoch and reads "
        "them in the first",
    ),
    PlanOption(
        "returnn_version",
        "Optional[str]",
        "the RETURNN release the training runs (returnn.__version__, e.g. 1.20240620.64807), whose own cut "
        "distribution returnn mirrors (it changed in 1.20240705.144031); default: the newest release's",
        check=check_returnn_version,
        read=lambda request: request.returnn_version,
        metavar="VERSION",
        doc="the RETURNN release the training runs (`returnn.__version__`, e.g. `1.20240620.64807`): "
        "`--distribution returnn` then cuts as that release's `_distribute_evenly_by_size` does, which changed in "
        "1.20240705.144031 ([returnn_versions.md](returnn_versions.md)); the plan file, `summary.json` and the "
        "report name it, and i6_shard's dataset class refuses the plan on a release that cuts otherwise; default: "
        "the newest release's cut",
    ),
)

#: Every plan option once, by name, in the order the command line and the job's signature show them.
PLAN_OPTIONS: Mapping[str, PlanOption] = MappingProxyType({row.name: row for row in _ROWS})


def option_defaults(options: Mapping[str, PlanOption]) -> Dict[str, Any]:
    """The optional options and their defaults."""
    return {name: o.default for name, o in options.items() if not o.required}
