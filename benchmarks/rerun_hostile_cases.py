"""Reruns the hostile cases of costs archives, batching limits, damaged and huge logs, edited plans, full disks and
``torch_distributed`` junk, and round 5's (empty files under equal_steps, a huge param_sync_step, deeply nested
settings, an archive where a file list belongs, stale lengths), each through the command line (or the call a Sisyphus graph makes), and prints per case
whether it held: the expected exit status and a one-line error naming what it should, or the expected refusal; for a
huge line that is to be reported, a report with its note, in a peak RSS below a bound.

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
from typing import Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(ROOT, "tests", "data", "plans", "format2_flexible_auto.npz")
sys.path.insert(0, ROOT)  # tests.plan_edits
from tests.plan_edits import edit_npz, empty_bin, long_distribution, repeat_file, vanish_file  # noqa: E402

LOG = os.path.join(ROOT, "tests", "data", "returnn_logs", "w4_bv24", "returnn.torch-distrib-{}-4.log")


def cli(root: str, *argv: str, cwd: str, timeout: Optional[float] = None):
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "i6_shard", *argv],
            capture_output=True,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": root},
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return -9, f"(killed after {timeout} s)", time.perf_counter() - t0
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

        results += huge_logs(root, d)
        results.append(full_disk(root, d))
        results += torch_distributed_junk(root)
        results += round5(root, d, lst)
    print(f"{sum(results)} of {len(results)} held")


#: Peak RSS a report of a log with one huge line may take (measured: 111 MiB for a 16 MiB "using files" line and
#: for a 64 MiB line without a newline, 40 MiB of which the interpreter and numpy take); a 16 MiB files line took 7.9
#: GB when it was parsed whole.
HUGE_LINE_MAX_RSS_MIB = 300


def _start_lines(r: int, e: int) -> str:
    return f"[default{r}]:start epoch {e} global train step 0\n"


def huge_logs(root: str, d: str) -> list:
    """Numbers beyond any training, each refused at its line; more records than a report holds, refused at the line of
    the first past the cap; a huge "using files" line and a huge line without newline, each reported (noted) in
    bounded memory."""
    out = []
    startup = "RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/python\n"
    step = "ep {e} train, step {s}, mse 0.5, num_seqs {n}, complete 60.00%\n"
    for name, tail, want in [
        ("a step of 3e9", step.format(e=1, s=3_000_000_000, n=3), "step 3000000000 is more than 1,000,000"),
        ("num_seqs 1e30", step.format(e=1, s=0, n=10**30), f"num_seqs {10**30} is more than 4,294,967,295"),
        ("sub-epoch 1e14", step.format(e=10**14, s=0, n=3), f"sub-epoch {10**14} is more than 2,147,483,647"),
    ]:
        path = f"{d}/numbers.log"
        with open(path, "w") as f:
            f.write(startup + "start epoch 1 global train step 0\n" + tail)
        rc, err, s = cli(root, "train-report", path, "--no-plot", "-o", f"{d}/hl_{len(out)}", cwd=d)
        out.append(held(f"a log line with {name}", rc, err, want=f"numbers.log:3: {want}", seconds=s))
    path = f"{d}/log.run.1"
    with open(path, "w") as f:
        f.write("[default0]:" + startup + "[default999999999999]:" + startup)
    rc, err, s = cli(root, "train-report", path, "--no-plot", "-o", f"{d}/hl_rank", cwd=d)
    out.append(held("a torchrun rank of 1e12", rc, err, want="log.run.1:2: torchrun rank 999999999999", seconds=s))
    path = f"{d}/returnn.torch-distrib-0-999999999999.log"
    with open(path, "w") as f:
        f.write(startup)
    rc, err, s = cli(root, "train-report", path, "--no-plot", "-o", f"{d}/hl_size", cwd=d)
    out.append(held("a world size of 1e12 in a log's name", rc, err, want="world size 999999999999", seconds=s))
    path = f"{d}/cap.log"  # 1024 ranks x 1025 sub-epochs: 1,049,600 records, 1,024 past the 2**20 a report holds
    with open(path, "w") as f:
        f.write("".join(f"[default{r}]:{startup}" for r in range(1024)))
        for e in range(1, 1026):
            f.write("".join(_start_lines(r, e) for r in range(1024)))
    rc, err, s = cli(root, "train-report", path, "--no-plot", "-o", f"{d}/hl_cap", cwd=d)
    want = "cap.log [rank 0]:1049601: sub-epoch 1025 of rank 0 takes the logs past the 1,048,576 (sub-epoch, rank)"
    out.append(held("a torchrun log of 1,049,600 records", rc, err, want=want, seconds=s))
    files = "<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: ["
    for name, (head, chunk, tail), note in [
        ('a "using files" line of 16 MiB', (files, "'data/file.hdf', " * (1 << 16), "]\n"), "were not read"),
        ("a line of 64 MiB without a newline", ("", "x" * (1 << 20) * 4, ""), None),
    ]:
        path = f"{d}/huge_line.log"
        with open(path, "w") as f:  # (in chunks: the peak RSS a child reports includes this process's at its start)
            f.write(startup + "start epoch 1 global train step 0\n" + step.format(e=1, s=0, n=3) + head)
            for _ in range(16):
                f.write(chunk)
            f.write(tail)
        out.append(reported(root, d, f"a log with {name}", path, note=note))
        os.remove(path)
    return out


def reported(root: str, d: str, name: str, path: str, *, note) -> bool:
    """Held: the report written (exit status 0), with ``note`` in report.txt, in a peak RSS below the bound."""
    code = (
        "import resource, sys\nfrom i6_shard.cli import main\nrc = main(sys.argv[1:])\n"
        "print('maxrss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)\n"
    )
    out = f"{d}/hl_report"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code, "train-report", path, "--no-plot", "-o", out],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    rss = [int(line.split()[1]) / 1024 for line in p.stderr.splitlines() if line.startswith("maxrss_kib")]
    text = open(f"{out}/report.txt").read() if os.path.exists(f"{out}/report.txt") else ""
    ok = p.returncode == 0 and (note is None or note in text) and rss and rss[0] < HUGE_LINE_MAX_RSS_MIB
    shown = f"peak RSS {rss[0]:.0f} MiB" if rss else "no RSS: " + (p.stderr.strip().splitlines() or ["?"])[-1][:200]
    print(f"{'HELD    ' if ok else 'NOT HELD'} {name}: rc {p.returncode}, {time.perf_counter() - t0:.1f} s: {shown}")
    return bool(ok)


def ran(name: str, rc: int, err: str, *, seconds: float, limit_s: float = 60.0) -> bool:
    """Held: the command succeeded (exit status 0, no traceback) within ``limit_s``."""
    ok = rc == 0 and "Traceback" not in err and seconds < limit_s
    print(f"{'HELD    ' if ok else 'NOT HELD'} {name}: rc {rc}, {seconds:.1f} s{'' if ok else ': ' + err[-260:]}")
    return ok


def round5(root: str, d: str, lst: str) -> list:
    """Round 5: costs archives with empty files under equal_steps, a huge param_sync_step, deeply nested settings,
    an archive where a file list belongs, a costs archive of an older version of a file."""
    from i6_shard import core
    from tests.costs_data import frames_costs

    run = lambda *argv: cli(root, *argv, cwd=d)  # noqa: E731
    rng = np.random.RandomState(1)
    num_seqs = rng.randint(1, 9, size=60) * (rng.rand(60) >= 0.4)
    lengths = [rng.randint(20, 400, size=n).astype(np.int32) for n in num_seqs]
    costs = f"{d}/empty_files_costs.npz"
    core.io.save_file_costs(frames_costs([f"/c/{i}.hdf" for i in range(60)], lengths), costs)
    args = ["--sizes", costs, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4", "--batch-size", "700"]
    out = []
    rc, err, s = run("plan", *args, "--distribution", "equal_steps", "--no-plot", "-o", f"{d}/r5_es")
    out.append(ran("equal_steps on a costs archive with files of no sequences", rc, err, seconds=s))
    sync = ["--reduce-type", "param", "--param-sync-step", str(10**12)]
    rc, err, s = cli(root, "plan", *args, *sync, "--no-plot", "-o", f"{d}/r5_sync", cwd=d, timeout=60)
    out.append(ran("--param-sync-step 10**12", rc, err, seconds=s, limit_s=30))
    deep = '{"reduce_type": "grad", "options": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}"
    rc, err, s = run("plan", *args, "--torch-distributed", deep, "--no-plot", "-o", f"{d}/r5_deep")
    out.append(held("--torch-distributed nested 500 deep", rc, err, want="nests dicts and lists", seconds=s))

    def deep_engine(data):
        return {**data, "engine_settings": np.array('{"torch_distributed": ' + '{"a": ' * 5000 + "1" + "}" * 5001)}

    rc, err, _ = run("plan", *args, "--reduce-type", "param", "--param-sync-step", "4", "--no-plot", "-o", f"{d}/r5_p")
    assert rc == 0, err
    path = edit_npz(f"{d}/r5_p/plan.npz", f"{d}/r5_deep_engine.npz", deep_engine)
    for command in (["files", "--rank", "0", "--epoch", "1", path], ["report", path]):
        rc, err, s = run(*command)
        want = "engine_settings nests dicts and lists"
        out.append(held(f"{command[0]} of a plan whose engine settings nest 5000 deep", rc, err, want=want, seconds=s))
    rc, err, s = run("costs", costs, "-o", f"{d}/r5_c.npz")
    out.append(held("costs costs.npz", rc, err, want="is a costs archive (.npz), not a file list", seconds=s))
    return out + stale_lengths(root, d, lst)


def stale_lengths(root: str, d: str, lst: str) -> list:
    """``plan --lengths`` with a costs archive computed before a file was rewritten."""
    from i6_shard import core

    run = lambda *argv: cli(root, *argv, cwd=d)  # noqa: E731
    rc, err, _ = run("costs", lst, "-o", f"{d}/r5_costs.npz")
    assert rc == 0, err
    first = core.read_file_list(lst)[0]
    st = os.stat(first)
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    rc, err, _ = run("sizes", lst, "-o", f"{d}/r5_sizes.npz")
    assert rc == 0, err
    plan = ["--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4", "--batch-size", "2000", "--no-plot"]
    rc, err, s = run("plan", "--sizes", f"{d}/r5_sizes.npz", "--lengths", f"{d}/r5_costs.npz", *plan, "-o", f"{d}/r5")
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns))
    return [held("plan --lengths of an older version of a file", rc, err, want="is older", seconds=s)]


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
