"""Benchmark: peak memory (RSS) of ``train-report`` on huge records: a "using files" line of 2 MiB and of 16 MiB,
and torchrun stdouts with 1024 ranks x 64 and x 1023 sub-epochs (65,536 and 1,047,552 (sub-epoch, rank) records, the
latter just under the cap), without and with a "using files" line per record. Each case runs in its own process; its
peak RSS (``ru_maxrss``), its status and the bytes it wrote are printed, and for each pair of record counts the bytes
of peak RSS each further record adds (the slope between them: what is made once does not count).

Run from the repository root: ``python benchmarks/bench_train_report_memory.py [--root DIR] [--cases NAME ...]``
(``--root`` runs another checkout's i6_shard, e.g. an older commit, on the same logs; ``--before DIR`` runs each case
with that checkout and then with this one, side by side).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_files_line_log(path: str, *, line_bytes: int, entry: Optional[str] = "'data/file.hdf', ") -> None:
    """A one-rank log whose sub-epoch 1 is given a list of files ``line_bytes`` long, of ``entry`` repeated."""
    if entry is None:  # distinct names, just under the length given
        files, size, i = [], 0, 0
        while size + 20 < line_bytes:
            files.append(f"'d/{i:012d}.hdf', ")
            size, i = size + len(files[-1]), i + 1
        text = "".join(files)
    else:
        text = entry * max(1, line_bytes // len(entry))
    with open(path, "w") as f:
        f.write("RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/python\n")
        f.write(f"<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: [{text}]\n")
        f.write("start epoch 1 global train step 0 with effective learning rate 0.001 ...\n")
        f.write("ep 1 train, step 0, mse 0.5, num_seqs 3, complete 100.00%\n")
        f.write("Epoch 1: Trained 1 steps, 0:00:00 elapsed\n")


def write_many_records_log(path: str, *, num_ranks: int, num_epochs: int) -> None:
    """A torchrun stdout in which each of ``num_ranks`` ranks starts ``num_epochs`` sub-epochs (one line each)."""
    with open(path, "w") as f:
        for r in range(num_ranks):
            f.write(f"[default{r}]:RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py\n")
        for e in range(1, num_epochs + 1):
            f.write("".join(f"[default{r}]:start epoch {e} global train step 0\n" for r in range(num_ranks)))


def write_many_files_records_log(path: str, *, num_ranks: int, num_epochs: int, partition_epoch: int = 4) -> None:
    """A torchrun stdout in which each of ``num_ranks`` ranks is given two files in each of ``num_epochs`` sub-epochs
    (its own two of each of ``partition_epoch`` sub-epochs of a full epoch: the names repeat each full epoch) and
    starts it."""
    files = "[default{r}]:<DistributeFilesDataset 'train' epoch={e}>: using files for epoch {e}: {files!r}\n"
    with open(path, "w") as f:
        for r in range(num_ranks):
            f.write(f"[default{r}]:RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py\n")
        for e in range(1, num_epochs + 1):
            s = (e - 1) % partition_epoch
            for r in range(num_ranks):
                f.write(files.format(r=r, e=e, files=[f"/data/part{s}_{r}_{j}.hdf" for j in range(2)]))
            f.write("".join(f"[default{r}]:start epoch {e} global train step 0\n" for r in range(num_ranks)))


def write_many_steps_log(path: str, *, num_ranks: int, num_epochs: int, num_steps: int) -> None:
    """A torchrun stdout in which each of ``num_ranks`` ranks runs ``num_epochs`` sub-epochs of ``num_steps`` step
    lines each (with log_batch_size's counts), each finished."""
    step = "ep {e} train, step {s}, mse 0.5, num_seqs 3, max_size:time:data 9, sum_size:time:data 20, complete 50.00%"
    with open(path, "w") as f:
        for r in range(num_ranks):
            f.write(f"[default{r}]:RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py\n")
        for e in range(1, num_epochs + 1):
            f.write("".join(f"[default{r}]:start epoch {e} global train step 0\n" for r in range(num_ranks)))
            for s in range(num_steps):
                f.write("".join(f"[default{r}]:{step.format(e=e, s=s)}\n" for r in range(num_ranks)))
            f.write("".join(f"[default{r}]:Epoch {e}: Trained {num_steps} steps\n" for r in range(num_ranks)))


CASES = {
    "files line 2 MiB": lambda p: write_files_line_log(p, line_bytes=2 << 20),
    "files line 16 MiB": lambda p: write_files_line_log(p, line_bytes=16 << 20),
    "files line 2 MiB, short names": lambda p: write_files_line_log(p, line_bytes=2 << 20, entry="'f', "),
    "files line 4 MiB, distinct names": lambda p: write_files_line_log(p, line_bytes=4 << 20, entry=None),
    "files line 16 MiB, distinct names": lambda p: write_files_line_log(p, line_bytes=16 << 20, entry=None),
    "65,536 records": lambda p: write_many_records_log(p, num_ranks=1024, num_epochs=64),
    "1,047,552 records": lambda p: write_many_records_log(p, num_ranks=1024, num_epochs=1023),
    "65,536 records with files": lambda p: write_many_files_records_log(p, num_ranks=1024, num_epochs=64),
    "1,047,552 records with files": lambda p: write_many_files_records_log(p, num_ranks=1024, num_epochs=1023),
    "1,600,000 step lines": lambda p: write_many_steps_log(p, num_ranks=8, num_epochs=100, num_steps=2000),
}


#: Pairs of cases (fewer records, more records) whose peaks give the bytes per further record.
SLOPES = [("65,536 records", "1,047,552 records"), ("65,536 records with files", "1,047,552 records with files")]


def _records(name: str) -> int:
    return int(name.split()[0].replace(",", ""))


def run_case(name: str, *, root: str, base: str, label: str = "") -> float:
    log = os.path.join(base, name.replace(" ", "_").replace(",", "") + ".log")
    out = os.path.join(base, "out_" + os.path.basename(log)[:-4])
    shutil.rmtree(out, ignore_errors=True)
    if not os.path.exists(log):
        CASES[name](log)
    code = (
        "import resource, sys\n"
        "from i6_shard.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "u = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print('maxrss_kib', u.ru_maxrss, file=sys.stderr)\n"
        "print('cpu_s', u.ru_utime + u.ru_stime, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code, "train-report", log, "--no-plot", "-o", out],
        env={**os.environ, "PYTHONPATH": root},
        cwd=root,  # (python -c puts the working directory first on sys.path)
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - t0
    rss = [line for line in p.stderr.splitlines() if line.startswith("maxrss_kib")]
    peak = int(rss[-1].split()[1]) / 1024 if rss else float("nan")
    cpu = [float(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("cpu_s")]
    error = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    written = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)) if os.path.isdir(out) else 0
    print(
        f"{label}{name:>20}: log {os.path.getsize(log) / 2**20:7.1f} MiB, peak RSS {peak:8.1f} MiB, {seconds:6.1f} s, "
        f"CPU {cpu[-1] if cpu else float('nan'):6.1f} s, "
        f"rc {p.returncode}, wrote {written / 2**20:.2f} MiB" + (f", {error[0][:150]}" if error else "")
    )
    return peak


def run_cases(names, roots, base: str) -> None:
    """Each case with each checkout, side by side; then the bytes per further record of each pair of cases run."""
    peaks = {}
    for name in names:
        for label, root in roots:
            peaks[label, name] = run_case(name, root=root, base=base, label=label)
    for few, many in SLOPES:
        for label, _ in roots:
            if (label, few) in peaks and (label, many) in peaks:
                slope = (peaks[label, many] - peaks[label, few]) * 2**20 / (_records(many) - _records(few))
                print(f"{label}{many}: {slope:.0f} bytes of peak RSS per further record (from {few})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=ROOT, help="the checkout whose i6_shard runs (default: this one)")
    parser.add_argument("--before", default=None, help="another checkout run first on each case, for a comparison")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--dir", default=None, help="where the logs are written (and kept); default: a temp dir")
    args = parser.parse_args()
    print(f"i6_shard from {args.root}; self RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    roots = [("before ", args.before), ("after  ", args.root)] if args.before else [("", args.root)]
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
        run_cases(args.cases, roots, args.dir)
        return
    with tempfile.TemporaryDirectory() as base:
        run_cases(args.cases, roots, base)


if __name__ == "__main__":
    main()
