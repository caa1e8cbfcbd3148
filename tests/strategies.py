"""Hypothesis strategies shared by the tests: file names, file trees, sizes, plan settings."""

from hypothesis import strategies as st

#: The quick tier (``-m "not slow"``, set by tests/conftest.py before the test modules are imported) runs every
#: invariant with a tenth of its examples.
QUICK = False


def examples(n: int) -> int:
    """Hypothesis examples of a test: ``n``, or a tenth of it (at least 5) in the quick tier."""
    return max(5, n // 10) if QUICK else n


from i6_shard.core.pure.settings import COST_DISTRIBUTIONS
from i6_shard.core.pure import SEED_LIMIT, SEQ_ORDERINGS, UNSHARDED_RANK_SEED_STRIDE
from i6_shard.core.pure.settings import SHARDING_MODES

# File names with unicode, separators (':' '/'), quotes, backslashes, blanks and newlines;
# never empty, never NUL, no lone surrogates (see odd_names for those).
file_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=12
) | st.lists(
    st.sampled_from(["a", ":", "/", "'", '"', "\\", " ", "\n", "\r", "#", "é", "€", "😀", "\\x41", "\t"]),
    min_size=1,
    max_size=6,
).map("".join)

# Names as os.listdir returns them for undecodable bytes too (lone surrogates from surrogateescape).
odd_names = st.text(alphabet=st.characters(blacklist_characters="\0"), min_size=1, max_size=12)

dict_keys = st.text(alphabet="abcdefgh_:/", min_size=1, max_size=4) | st.text(max_size=4)


def file_trees(leaves=file_names, max_leaves: int = 6):
    """A str, or nested tuple/list/dict of str (what DistributeFilesDataset accepts as one entry)."""
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3),
            st.lists(children, min_size=1, max_size=3).map(tuple),
            st.dictionaries(dict_keys, children, min_size=1, max_size=3),
        ),
        max_leaves=max_leaves,
    )


# Names that can be created in one directory: no '/', not '.' or '..', at most 40 UTF-8 bytes.
fs_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"), min_size=1, max_size=10
).filter(lambda s: s not in (".", "..") and len(s.encode("utf-8")) <= 40)

# Sizes as RETURNN sees them: bytes, zeros and duplicates included.
file_sizes = st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=60)


@st.composite
def plan_settings_kwargs(
    draw, *, sharding=None, distribution=None, with_num_epochs=None, max_num_shards=4, max_partition_epoch=4
):
    """Keyword arguments of a valid PlanSettings, as Python ints, bools and strs.

    Every sharding mode, seq ordering and distribution (unless fixed by the arguments); seeds on
    both edges of what numpy's RandomState takes, and, where RETURNN does not shuffle with the
    offset (``seq_ordering="default"`` or a ``fixed_random_seed``), any int64 offset.
    """
    sharding = draw(st.sampled_from(sorted(SHARDING_MODES))) if sharding is None else sharding
    distrib_shard_files, same_seed = SHARDING_MODES[sharding]
    num_shards = draw(st.integers(1, max_num_shards))
    partition_epoch = draw(st.integers(1, max_partition_epoch))
    if with_num_epochs is None:
        with_num_epochs = draw(st.booleans())
    num_epochs = draw(st.integers(1, 3 * partition_epoch + 1)) if with_num_epochs else None
    seq_ordering = draw(st.sampled_from(SEQ_ORDERINGS))
    fixed_random_seed = draw(st.none() | st.sampled_from([0, SEED_LIMIT - 1]) | st.integers(0, SEED_LIMIT - 1))
    if seq_ordering == "random" and fixed_random_seed is None:  # the offset makes the seeds
        last_full_epoch = 0 if num_epochs is None else (num_epochs - 1) // partition_epoch
        top_rank = num_shards - 1 if not distrib_shard_files and not same_seed else 0
        top = SEED_LIMIT - 1 - (last_full_epoch + 1) - top_rank * UNSHARDED_RANK_SEED_STRIDE
        random_seed_offset = draw(st.sampled_from([-1, 0, top]) | st.integers(-1, top))
    else:
        random_seed_offset = draw(st.integers(-(2**63), 2**63 - 1))
    return dict(
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        num_epochs=num_epochs,
        seq_ordering=seq_ordering,
        random_seed_offset=random_seed_offset,
        fixed_random_seed=fixed_random_seed,
        distrib_shard_files=distrib_shard_files,
        same_seed_on_all_ranks=same_seed,
        distribution=draw(st.sampled_from(COST_DISTRIBUTIONS)) if distribution is None else distribution,
    )


@st.composite
def returnn_dfd_setups(draw, *, files, list_file):
    """A RETURNN config (dict) with one DistributeFilesDataset over ``files`` (or ``list_file``), alone or
    inside a wrapper, under every distributed setting the reader models, and the number of ranks.
    Everything that decides ``_num_shards``/``_shard_index``/``random_seed_offset`` varies."""
    from tests.returnn_config.config_ranks import hdf_sub_epoch, hdf_sub_epoch_explicit_shards

    maybe_offset = st.none() | st.integers(0, 50)
    dfd = {
        "class": "DistributeFilesDataset",
        "use_worker_proc": False,
        "get_sub_epoch_dataset": draw(st.sampled_from([hdf_sub_epoch, hdf_sub_epoch_explicit_shards])),
    }
    options = {
        "files": st.sampled_from([list(files), list_file]),
        "distrib_shard_files": st.booleans(),
        "sharding_fix": st.sampled_from([True, False]),
        "random_seed_offset": maybe_offset,
        "fixed_random_seed": st.integers(0, 9),
        "partition_epoch": st.integers(1, 2),
        "seq_ordering": st.sampled_from(["random", "default"]),
    }
    for key, values in options.items():
        if key == "files" or draw(st.booleans()):
            dfd[key] = draw(values)
    wrapper = draw(st.sampled_from([None, "CombinedDataset", "ConcatDataset", "MultiEpochDataset"]))
    if wrapper is None:
        dataset = dfd
    elif wrapper == "CombinedDataset":
        dataset = {
            "class": wrapper,
            "seq_ordering": "interleave",
            "datasets": {"asr": dfd},
            "data_map": {("asr", "data"): "data"},
        }
    elif wrapper == "ConcatDataset":
        dataset = {"class": wrapper, "datasets": [dfd]}
    else:
        dataset = {"class": wrapper, "multi_epoch": 1, "dataset": dfd}
    if wrapper is not None:
        offset = draw(maybe_offset)
        if offset is not None:
            dataset["random_seed_offset"] = offset
    config = {"backend": "torch"}
    torch_distributed = draw(
        st.sampled_from([None, {}, {"dataset_distribution": "shard"}, {"dataset_distribution": "random_seed_offset"}])
    )
    if torch_distributed is not None:
        config["torch_distributed"] = torch_distributed
    for key, values in (
        ("dataset_random_seed_offset", st.integers(0, 9)),
        ("behavior_version", st.sampled_from([20, 26])),
    ):
        if draw(st.booleans()):
            config[key] = draw(values)
    # dev/eval: RETURNN's default seq_ordering there is "sorted", which the wrappers have rules of their own for
    config["dev" if wrapper is None and draw(st.booleans()) else "train"] = dataset
    return config, draw(st.integers(1, 3))


@st.composite
def node_caches(draw, *, max_ranks_per_node: int = 4, max_preload: int = 3):
    """A NodeCache: ranks per node (fewer, as many or more than the ranks), RETURNN's preload_next_n_sub_epochs
    (0, its default 1, or more) and whether the files go through CachedFile."""
    from i6_shard.core.pure.cache import NodeCache

    return NodeCache(
        ranks_per_node=draw(st.integers(1, max_ranks_per_node)),
        preload_next_n_sub_epochs=draw(st.integers(0, max_preload)),
        cached_file=draw(st.booleans()),
    )


#: Sub-epoch dataset ``seq_ordering`` values the engine simulation mirrors (RETURNN's get_seq_order_for_epoch).
sub_epoch_seq_orderings = st.one_of(
    st.sampled_from(["default", "reverse", "sorted", "sorted_reverse", "random", "laplace", "sort_bin_shuffle"]),
    st.integers(1, 3).map(lambda n: f"random:{n}"),
    st.tuples(st.sampled_from(["laplace", "sort_bin_shuffle", "sort_bin_shuffle_x2"]), st.integers(1, 6)).map(
        lambda t: f"{t[0]}:{t[1]}"
    ),
    st.tuples(st.sampled_from(["laplace", "sort_bin_shuffle"]), st.integers(1, 5), st.integers(1, 3)).map(
        lambda t: f"{t[0]}:.{t[1]}:{t[2]}"
    ),
)


@st.composite
def torch_sync_setups(draw, *, num_ranks: int):
    """``(torch_distributed, ranks_per_node)``: grad, grad_explicit, param, or sync levels as RETURNN checks them."""
    kind = draw(st.sampled_from(["grad", "grad_explicit", "param", "sync"]))
    if kind == "grad":
        return {}, None
    if kind == "grad_explicit":
        return {"reduce_type": "grad_explicit"}, None
    if kind == "param":
        return {"reduce_type": "param", "param_sync_step": draw(st.integers(1, 6))}, None
    divisors = [d for d in range(1, num_ranks + 1) if num_ranks % d == 0]
    per_node = draw(st.sampled_from(divisors))
    levels = []
    if draw(st.booleans()):
        levels.append({"group": "node", "type": "grad"})
    every = 1
    for group in draw(st.lists(st.sampled_from(["node", "world"]), min_size=0 if levels else 1, max_size=2)):
        if levels and levels[-1]["group"] == "world" and group == "node":
            group = "world"
        every *= draw(st.integers(1, 3))
        levels.append({"group": group, "type": "param", "every": every})
    return {"sync": levels}, per_node


_sync_groups = st.sampled_from(["world", "node", "junk", 0, 1, 2, 3, 4, True, [[0, 1], [2, 3]], [[0, 2], [1, 3]]])
_sync_groups = _sync_groups | st.sampled_from([[[0], [1, 2, 3]], [[0, 0], [1, 2]], [[0, 1, 2, 3]], ["ab"], None])
_EVERY_ABSENT = object()


@st.composite
def sync_levels(draw):
    """One level of ``torch_distributed``'s ``sync``, valid or not (RETURNN's ``_parse_sync_levels`` decides)."""
    level = {
        "group": draw(_sync_groups),
        "type": draw(st.sampled_from(["grad", "param", "junk", "", 0, None])),
    }
    every = draw(st.sampled_from([_EVERY_ABSENT, 1, 2, 4, 6, 0, -1, "2", 2.0, True]))
    if every is not _EVERY_ABSENT:
        level["every"] = every
    for key in draw(st.lists(st.sampled_from(["sync_on_cpu", "sync_optimizer_state", "typo"]), max_size=2)):
        level[key] = False
    for key in draw(st.lists(st.sampled_from(["group", "type"]), max_size=1)):
        del level[key]
    return level


@st.composite
def torch_distributed_options(draw):
    """A ``torch_distributed`` value, valid or not: junk (``"yes"``, ``[]``, ``5``), or a dict of RETURNN's options
    with fuzzed values and sometimes keys RETURNN does not read."""
    junk = st.sampled_from(["yes", [], 5, 0, "", True, ("reduce_type", "grad")])
    if draw(st.integers(0, 9)) == 0:
        return draw(junk)
    opts = {}
    choices = {
        "reduce_type": st.sampled_from(["grad", "grad_explicit", "param", "sync", "junk", "", 0, None, True]),
        "param_sync_step": st.sampled_from([1, 100, 0, -1, True, "5", 2.0, None]),
        "sync": st.lists(sync_levels(), max_size=3) | st.sampled_from(["junk", None, {}]),
        "dataset_distribution": st.sampled_from(["random_seed_offset", "shard", "junk", None]),
        "sync_complete_frac": st.booleans(),
        "sync_at_epoch_end": st.booleans(),
        "backend": st.just("gloo"),
        "timeout_sec": st.just(60),
        "sync_on_cpu": st.booleans(),
        "sync_optimizer_state": st.booleans(),
        "class": st.none(),
        "options": st.just({}),
        "typo_reduce_typ": st.just("param"),
    }
    for key in draw(st.lists(st.sampled_from(sorted(choices)), unique=True, max_size=4)):
        opts[key] = draw(choices[key])
    return opts
