"""Reruns the hostile cases of costs archives, batching limits, damaged and huge logs, edited plans, full disks and
``torch_distributed`` junk, each through the command line (or the call a Sisyphus graph makes), and prints per case
whether it held: the expected exit status and a one-line error naming what it should, or the expected refusal.

Run from the repository root: ``python benchmarks/rerun_hostile_cases.py [--root DIR]`` (``--root``: another
checkout, e.g. an older commit, run on the same inputs). Needs h5py; the full-disk case needs ``unshare`` and root.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(ROOT, "tests", "data", "plans", "format2_flexible_auto.npz")
sys.path.insert(0, ROOT)  # tests.plan_edits
from tests.plan_edits import edit_npz, empty_bin, long_distribution, repeat_file, vanish_file  # noqa: E402

LOG = os.path.join(ROOT, "tests", "data", "returnn_logs", "w4_bv24", "returnn.torch-distrib-{}-4.log")


def cli(root: str, *argv: str, cwd: str):
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "i6_shard", *argv],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    return p.returncode, p.stderr, time.perf_counter() - t0


def held(name: str, rc: int, err: str, *, want: str, seconds: float) -> bool:
    one_line = err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    ok = rc == 2 and one_line and want in err
    shown = err.strip().splitlines()[-1] if err.strip() else "(nothing on stderr)"
    print(f"{'HELD    ' if ok else 'NOT HELD'} {name}: rc {rc}, {seconds:.1f} s: {shown[:260]}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=ROOT)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    results = []
    with tempfile.TemporaryDirectory() as d:
        run = lambda *argv: cli(root, *argv, cwd=d)  # noqa: E731
        rc, err, _ = run("make-data", "-o", f"{d}/data", "--num-files", "32")
        assert rc == 0, err
        lst = f"{d}/data/files.txt"
        rc, err, _ = run("costs", lst, "--unit", "steps", "--batch-size", "300", "-o", f"{d}/steps.npz")
        assert rc == 0, err
        plan_args = ["--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4", "--no-plot"]

        def swap(data):
            return {**data, "seq_lengths": np.random.RandomState(0).permutation(data["seq_lengths"])}

        swapped = edit_npz(f"{d}/steps.npz", f"{d}/swapped.npz", swap)
        rc, err, s = run("plan", "--sizes", swapped, *plan_args, "-o", f"{d}/p1")
        results.append(
            held("steps archive with lengths moved between files", rc, err, want="contradicts itself", seconds=s)
        )

        rc, err, s = run("costs", lst, "--unit", "steps", "--batch-size", str(2**40), "-o", f"{d}/c40.npz")
        results.append(held("costs --batch-size 2**40", rc, err, want="the largest useful batch_size", seconds=s))

        entries = ",".join(f"{{'file': 'a{i}.ogg', 'seq_name': 's{i}', 'duration': 2.5, 'text': ''}}" for i in range(4))
        with zipfile.ZipFile(f"{d}/corpus.zip", "w") as z:
            z.writestr("corpus.txt", f"[{entries}]")
        with open(f"{d}/ogg.txt", "w") as f:
            f.write(f"{d}/corpus.zip\n")
        rc, err, s = run("costs", f"{d}/ogg.txt", "--frame-rate", "1e300", "-o", f"{d}/ogg.npz")
        results.append(held("--frame-rate 1e300 on an OggZip corpus", rc, err, want="(--frame-rate)", seconds=s))

        for name, tail, want in [
            ("a step line with complete 1.2.3%", "ep 1 train, step 0, num_seqs 3, complete 1.2.3%\n", ":"),
            (
                "a using-files line with non-text entries",
                "<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: [1, 2]\n",
                "are not file trees",
            ),
        ]:
            logs = []
            for r in range(4):
                with open(LOG.format(r), "rb") as f:
                    data = f.read()
                path = f"{d}/{name[:6].replace(' ', '_')}.torch-distrib-{r}-4.log"
                with open(path, "wb") as f:
                    f.write(data + (tail.encode() if r == 2 else b""))
                logs.append(path)
            lineno = (data + tail.encode()).count(b"\n")
            rc, err, s = run("train-report", *logs, "--no-plot", "-o", f"{d}/tr_{len(results)}")
            want_line = f"{os.path.basename(logs[2])}:{lineno}: " + ("complete" if "complete" in tail else "the files")
            results.append(held(name, rc, err, want=want_line if want == ":" else want, seconds=s))

        for name, fn in [("repeats", repeat_file), ("vanishes", vanish_file), ("empty bin", empty_bin)]:
            path = edit_npz(PLAN, f"{d}/edited_{fn.__name__}.npz", fn)
            rc, err, s = run("report", path)
            results.append(
                held(f"report of a flexible_auto plan whose file {name}", rc, err, want=repr(path), seconds=s)
            )
        path = edit_npz(PLAN, f"{d}/long_distribution.npz", long_distribution)
        rc, err, s = run("report", path)
        results.append(held("a plan whose distribution is 10 M characters", rc, err, want=repr(path), seconds=s))

        results.append(full_disk(root, d))
        results += torch_distributed_junk(root)
    print(f"{sum(results)} of {len(results)} held")


def full_disk(root: str, d: str) -> bool:
    unshare = shutil.which("unshare")
    mnt = f"{d}/mnt"
    os.makedirs(mnt)
    script = (
        'mount -t tmpfs -o size=200k tmpfs "$1" && cd "$2" && PYTHONPATH="$2" exec '
        f'{sys.executable} -m i6_shard make-data -o "$1/data"'
    )
    t0 = time.perf_counter()
    p = subprocess.run([unshare, "-rm", "sh", "-c", script, "sh", mnt, root], capture_output=True, text=True)
    return held(
        "make-data on a full disk", p.returncode, p.stderr, want="no space left", seconds=time.perf_counter() - t0
    )


def torch_distributed_junk(root: str) -> list:
    """What ``TrainReportJob.for_training`` reads (``read_sync_mode``) and the config checks, in a subprocess."""
    code = (
        "import sys\n"
        "from i6_shard.returnn_config.reader import read_sync_mode\n"
        "for junk in [{'reduce_type': 0}, {'reduce_type': ''}, {'sync': [{'group': 'world', 'type': 'junk'}]},"
        " 'yes', [], 5]:\n"
        "    try:\n"
        "        mode = read_sync_mode({'torch_distributed': junk})\n"
        "        print('NOT HELD', repr(junk), 'read as', mode)\n"
        "    except (ValueError, TypeError) as exc:\n"
        "        print('HELD    ', repr(junk), 'refused:', exc)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": root}
    )
    out = []
    for line in (p.stdout or p.stderr).strip().splitlines():
        print(f"{line[:8]} torch_distributed={line[9:][:250]}")
        out.append(line.startswith("HELD"))
    return out or [False]


if __name__ == "__main__":
    main()
