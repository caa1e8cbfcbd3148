"""ComputeFileCostsJob: frames, sequences or expected steps of every entry of a DistributeFilesDataset file list, read
from the files' metadata once, as a cached Sisyphus output that ShardPlanJob, the builder and the
RETURNN-side dataset take where they take sizes."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Union

from sisyphus import Job, tk

from i6_shard import core
from i6_shard.core.io import collect_file_costs, cost_leaf, save_file_costs
from i6_shard.core.pure import Batching, COST_UNITS, batching_of, check_batching_for_unit, check_frame_rate

from .sizes import ComputeFileSizesJob, _checked_args as _checked_list_args
from .util import RQMT_ARGS, PlainNumbersJobType, check_rqmt_args, instantiate, sized_task

__all__ = ["ComputeFileCostsJob"]


def _checked_args(args: Dict[str, Any]) -> bool:
    """Every argument checked before hashing; returns whether out_file_list is a .txt list."""
    txt, _, _, _ = _checked_list_args({"files": args["files"]})
    unit = args["unit"]
    if unit not in COST_UNITS:
        raise ValueError(
            f"unit={unit!r} cannot be read from the files; use one of {COST_UNITS} (bytes: ComputeFileSizesJob)"
        )
    leaf = args.get("leaf")
    if leaf is not None and (isinstance(leaf, bool) or not isinstance(leaf, (int, str))):
        raise TypeError(
            f"leaf={leaf!r} must be None, an int (position among a tree's leaves) or a str (path of "
            "dict keys / list indices joined by '/')"
        )
    if isinstance(args["files"], (list, tuple)):
        for tree in instantiate(list(args["files"]))[:1]:  # the first tree shows a leaf that names nothing
            cost_leaf(tree, leaf=leaf)
    frame_rate = args["frame_rate"]
    check_frame_rate(frame_rate)
    stream = args["stream"]
    if not isinstance(stream, str) or not stream:
        raise ValueError(f"stream={stream!r} must name an HDF stream, e.g. 'data' or 'classes'")
    core.pure.check_optional_int(args.get("num_procs"), name="num_procs", minimum=1, hint="or None")
    _steps_batching(args)
    length_column = args.get("length_column")
    if length_column is not None and (not isinstance(length_column, str) or not length_column):
        raise ValueError(f"length_column={length_column!r} must name a column of the arrow shards, or be None")
    check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})
    return txt


def _steps_batching(args: Dict[str, Any]) -> Optional[Batching]:
    """The batching limits of unit "steps" (required there, refused elsewhere), or None."""
    batching = batching_of(args.get("batch_size"), args.get("max_seqs"))
    check_batching_for_unit(args["unit"], batching)
    return batching


class ComputeFileCostsJob(Job, metaclass=PlainNumbersJobType):
    """Costs of the entries of a file list in frames, sequences or expected steps, read from RETURNN HDF
    files' ``seqLengths`` (the features are not read), OggZip manifests or arrow shards (rows, a length
    column), for ShardPlanJob (``file_sizes=``), the builder and the i6_shard dataset, which then balance by
    that unit.

    Outputs:
      - out_file_list: the list as DistributeFilesDataset reads it (as ComputeFileSizesJob's);
      - out_file_costs: ``file_costs.npz`` (see ``i6_shard.core.io.file_costs.save_file_costs``): the costs
        in list order with the unit, the sequences and frames per entry and the length quantiles.
    """

    _list_path = ComputeFileSizesJob._list_path
    _trees = ComputeFileSizesJob._trees
    _is_callable = ComputeFileSizesJob._is_callable
    __sis_hash_exclude__ = {"batch_size": None, "max_seqs": None, "length_column": None}

    def __init__(
        self,
        files: Union[Sequence[Any], tk.Path],
        *,
        unit: str = "frames",
        leaf: Union[None, int, str] = None,
        stream: str = "data",
        frame_rate: float = 100.0,
        batch_size: Optional[int] = None,
        max_seqs: Optional[int] = None,
        length_column: Optional[str] = None,
        num_procs: Optional[int] = None,
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
    ):
        """
        :param files: a list of file trees (leaves: tk.Path or str), or a tk.Path to a list file
        :param unit: "frames" (of ``stream``), sequences ("seqs"), or "steps": the expected steps of each
            file's sequences under ``batch_size``/``max_seqs``, in milli-steps
        :param leaf: multimodal trees: the leaf whose sequences count (``core.io.file_costs.cost_leaf``)
        :param stream: the HDF stream whose lengths count ("data", or a target key)
        :param frame_rate: OggZip zips: feature frames per second of the manifest's durations
        :param batch_size: unit "steps" only: RETURNN's batch_size in frames (padding included)
        :param max_seqs: unit "steps" only: RETURNN's max_seqs
        :param length_column: arrow shards (``.arrow``): the column of each row's length (an int column, or a
            list column whose lengths count); needed for frames and steps, without it a shard counts its rows
        :param num_procs: processes reading the files (default: the task's CPUs, at most 8); not hashed
        :param time_rqmt: hours (default 1; up to 20,000 entries a mini task); not hashed
        :param mem_rqmt: GB (default 2); not hashed
        :param cpu_rqmt: CPUs (default 1); not hashed
        """
        txt = _checked_args(
            dict(
                files=files,
                unit=unit,
                leaf=leaf,
                stream=stream,
                frame_rate=frame_rate,
                batch_size=batch_size,
                max_seqs=max_seqs,
                length_column=length_column,
                num_procs=num_procs,
                time_rqmt=time_rqmt,
                mem_rqmt=mem_rqmt,
                cpu_rqmt=cpu_rqmt,
            )
        )
        self.files = files
        self.unit = unit
        self.leaf = leaf
        self.stream = stream
        self.frame_rate = frame_rate
        self.batch_size = batch_size
        self.max_seqs = max_seqs
        self.length_column = length_column
        self.num_procs = num_procs
        self.given_rqmt = check_rqmt_args(time_rqmt=time_rqmt, mem_rqmt=mem_rqmt, cpu_rqmt=cpu_rqmt)

        self.out_file_list = self.output_path("files.txt" if txt else "files.json")
        self.out_file_costs = self.output_path("file_costs.npz")

    @classmethod
    def hash(cls, parsed_args):
        d = dict(parsed_args)
        _checked_args(d)
        for name in ("num_procs", *RQMT_ARGS):
            d.pop(name, None)
        return super().hash(d)

    def tasks(self):
        yield sized_task("run", given=self.given_rqmt, sized={"cpu": 1, "mem": 2, "time": 1}, mini=not self.given_rqmt)

    def run(self):
        trees = self._trees()
        costs = collect_file_costs(
            trees,
            unit=self.unit,
            leaf=self.leaf,
            stream=self.stream,
            frame_rate=self.frame_rate,
            batching=_steps_batching(vars(self)),
            length_column=self.length_column,
            num_procs=self.num_procs,
        )  # None: the task's CPUs (default_num_procs)
        core.write_file_list(trees, self.out_file_list.get_path())
        save_file_costs(costs, self.out_file_costs.get_path())
