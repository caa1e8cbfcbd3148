"""What VerifyShardingJob's reader records in each process that reads the data (a DataLoader worker, or the
main process): per epoch of its DistributeFilesDataset copy, the shard it was, the files it chose, the tags it
delivered and whether its sub-epoch datasets were read in that process. Its own module, so that its objects pickle by name into the workers (the verifier runs as
``__main__``)."""

from __future__ import annotations

from typing import Any, Dict, Sequence

import torch.utils.data


class RecordingReset:
    """The engine's reset callback, run where the data is read after RETURNN's own (worker sharding set, if any):
    on first use it makes the DistributeFilesDataset at ``key_path`` inside ``dataset`` note every epoch it
    initializes (RETURNN's ``DistributeFilesDataset.init_seq_order``, with its ``_num_shards``/``_shard_index`` and
    the files of that epoch), and reads its sub-epoch datasets in this process where RETURNN's process for each would
    see the same (:func:`~i6_shard.returnn_ext.in_process.read_sub_epochs_in_process`); each reset starts a new
    sub-epoch's notes."""

    def __init__(self, reset, dataset, *, key_path: Sequence[Any]):
        self.reset, self.dataset, self.key_path = reset, dataset, list(key_path)
        self.inits: Dict[int, Dict[str, Any]] = {}
        self.dfd = None

    def _hook(self) -> None:
        from returnn.datasets.distrib_files import _get_key_for_file_tree

        from i6_shard.returnn_ext.in_process import read_sub_epochs_in_process
        from i6_shard.returnn_ext.locate import locate_dataset

        dfd = locate_dataset(self.dataset, self.key_path)
        original, inits = dfd.init_seq_order, self.inits
        in_process = read_sub_epochs_in_process(dfd)

        def init_seq_order(epoch=None, seq_list=None, seq_order=None):
            result = original(epoch=epoch, seq_list=seq_list, seq_order=seq_order)
            if epoch is not None:
                p = dfd.partition_epoch
                files = dfd._files_order_cache[(epoch - 1) // p][(epoch - 1) % p]
                inits[int(epoch)] = {
                    "num_shards": int(dfd._num_shards),
                    "shard_index": int(dfd._shard_index),
                    "files": [_get_key_for_file_tree(t) for t in files],
                    "seq_tags": [],
                    "sub_epochs_in_process": in_process,
                }
            return result

        dfd.init_seq_order = init_seq_order
        self.dfd = dfd

    def __call__(self):
        if self.dfd is None:
            self._hook()
        self.inits.clear()
        self.reset()


class RecordingTail(torch.utils.data.IterDataPipe):
    """Passes the sequences of ``source`` (RETURNN's ``ReturnnDatasetIterDataPipe``) on, notes each tag under the
    epoch its DistributeFilesDataset is in, and at the sub-epoch's end puts the notes (of this reading process,
    ``worker``) into ``out``, a manager list."""

    def __init__(self, source, *, recording: RecordingReset, top, out):
        super().__init__()
        self.source, self.recording, self.top, self.out = source, recording, top, out

    def __iter__(self):
        for data in self.source:
            inner = self.recording.inits.get(self.recording.dfd.epoch)
            if inner is not None:
                inner["seq_tags"].append(str(data["seq_tag"]))
            yield data
        info = torch.utils.data.get_worker_info()
        self.out.append(
            {
                "epoch": int(self.top.epoch),
                "worker": 0 if info is None else int(info.id),
                "inits": {int(k): dict(v) for k, v in self.recording.inits.items()},
            }
        )
