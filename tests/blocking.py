"""Running a call that may block (e.g. opening a FIFO) in a test without hanging the test run, and waiting for a
state (a process ended, a queue drained) that only a hang, not a slow machine, keeps from coming."""

import os
import signal
import subprocess
import tempfile
import threading
import time

import pytest


def returns_within(fn, stall=60.0, unblock=None, *, poll=0.5, clock=time.monotonic):
    """fn()'s result, run in a thread: fails (instead of hanging) if it blocks, then ``unblock()`` frees it. Blocked
    means its thread used no CPU for ``stall`` seconds (``clock``'s) while it had not returned, as in an ``open`` that
    waits for a FIFO's writer; a loaded machine only slows a thread that computes, it never stops it that long."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def progress():
        try:
            return thread.is_alive(), time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # the thread ended between the two looks
            return False, None

    try:
        wait_for_state(
            progress,
            done=lambda s: not s[0],
            what=f"{fn} (blocked)",
            stall=stall,
            poll=poll,
            pause=thread.join,
            clock=clock,
        )
    except BaseException:
        if unblock:
            unblock()
        thread.join(5)  # a hang guard: the unblocked call returns at once
        raise
    if "error" in result:
        raise result["error"]
    return result["value"]


def unblock_fifo(path):
    """Open the FIFO for writing (and close it), which releases a reader blocked in open."""

    def unblock():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    return unblock


#: Seconds in which nothing a wait watches changed before :func:`wait_for_state` calls it a hang.
STALL_SECONDS = 600.0


def wait_for_state(snapshot, *, done, what, stall=STALL_SECONDS, poll=0.5, pause=time.sleep, clock=time.monotonic):
    """Poll ``snapshot()`` (what the wait watches: a process's exit code, queue states, log sizes, file times) until
    ``done(snapshot)``, however long that takes while the snapshot keeps changing: the state decides, not the clock.
    Fails, naming ``what`` and the last snapshot, only when the snapshot stayed the same for ``stall`` seconds (a
    hang: a loaded machine is slow, not still).

    :param pause: called with ``poll`` between snapshots (e.g. a wait that returns early when the awaited ends)
    :param clock: the seconds that ``stall`` counts in (a test gives its own)
    :return: the snapshot that was done
    """
    last, since = None, clock()
    while True:
        now = snapshot()
        if done(now):
            return now
        if now != last:
            last, since = now, clock()
        elif clock() - since > stall:
            pytest.fail(f"{what}: nothing changed for {stall:.0f} s (a hang); last seen: {now!r}")
        pause(poll)


def newest_change(directory: str) -> float:
    """The latest modification time of ``directory`` or anything under it (what a running Sisyphus setup changes:
    a task writes its usage file every minute, RETURNN its logs): a progress snapshot for :func:`wait_for_state`."""
    newest = 0.0
    for root, _, files in os.walk(directory):
        for name in [root] + [os.path.join(root, f) for f in files]:
            try:
                newest = max(newest, os.stat(name).st_mtime)
            except OSError:  # gone meanwhile
                pass
    return newest


def _until_exit(proc):
    """A pause of at most the given seconds that ends as soon as ``proc`` exits (a quick child costs no poll)."""

    def pause(seconds):
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    return pause


def wait_for_process(proc, *, what, watch=(), snapshot=lambda: None, stall=STALL_SECONDS, clock=time.monotonic):
    """Wait until ``proc`` exits by itself, however long that takes while its work goes on: the sizes and latest
    changes of the paths in ``watch`` (its log, its work dir) and ``snapshot()`` (e.g. a queue's states) make the
    progress snapshot of :func:`wait_for_state`. On a hang, or any error while waiting, kills ``proc``'s process group
    (start it with ``start_new_session=True``) before failing. Returns its exit code."""

    def progress():
        seen = []
        for path in watch:
            seen.append(newest_change(path) if os.path.isdir(path) else os.path.getsize(path))
        return proc.poll(), seen, snapshot()

    try:
        wait_for_state(
            progress,
            done=lambda state: state[0] is not None,
            what=what,
            stall=stall,
            poll=1.0,
            pause=_until_exit(proc),
            clock=clock,
        )
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)  # the process and the workers it started
        proc.wait()
        raise
    return proc.returncode


def _cpu_ticks(pid: int) -> int:
    """CPU clock ticks a process and its waited-for children used (``/proc/<pid>/stat``), 0 where unknown: a process
    that computes without writing is working, not hung."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    except (OSError, IndexError, ValueError):
        return 0


def run_to_end(cmd, *, env=None, cwd=None, preexec_fn=None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` without a time limit: it waits as long as the process
    writes output or uses CPU (:func:`wait_for_process`), and fails only on a hang. ``preexec_fn`` as in
    ``subprocess.Popen`` (e.g. a ``resource.setrlimit`` in the child)."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                cmd, env=env, cwd=cwd, stdout=out, stderr=err, start_new_session=True, preexec_fn=preexec_fn
            )
            returncode = wait_for_process(
                proc, what=f"{cmd!r}", watch=(out_path, err_path), snapshot=lambda: _cpu_ticks(proc.pid)
            )
        with open(out_path, encoding="utf-8", errors="replace") as f:
            stdout = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            stderr = f.read()
    return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)
