"""Progress lines on stderr for long work: done/total and rate every few seconds,
nothing at all for work that finishes quickly."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, Iterator, Optional, TextIO

__all__ = ["DEFAULT_INTERVAL"]

#: Seconds before the first line and between lines: work done sooner prints nothing.
DEFAULT_INTERVAL = 2.0


class Progress:
    """Thread-safe counter that prints ``label: done/total (pct) rate/s, ETA`` at most
    every ``interval`` seconds (default :data:`DEFAULT_INTERVAL`), the first line only after ``interval`` seconds. ``clock`` gives
    the time in seconds (``time.monotonic``; tests pass their own to step time without waiting).

    >>> p = Progress("stat", total=3, interval=3600)
    >>> p.add(3); p.close()  # fast work prints nothing
    >>> now = [0.0]
    >>> p = Progress("stat", total=0, interval=5, stream=sys.stdout, clock=lambda: now[0])
    >>> now[0] = 5.0; p.add(0)  # no work at all: 100%, rate 0, no ETA
    stat: 0/0 files (100.0%), 0 files/s, elapsed 5s, ETA infs
    """

    def __init__(
        self,
        label: str,
        *,
        total: int,
        interval: Optional[float] = None,
        unit: str = "files",
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.label = label
        self.total = total
        self.interval = DEFAULT_INTERVAL if interval is None else interval  # read now: tests may set it
        self.unit = unit
        self.stream = stream
        self.done = 0
        self._clock = clock
        self._start = clock()
        self._last = self._start
        self._printed_done = -1  # done count of the last line printed; -1: none yet
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        """Count ``n`` more items done; print a line if one is due."""
        with self._lock:
            self.done += n
            now = self._clock()
            if now - self._last >= self.interval:
                self._last = now
                self._print(now)

    def close(self) -> None:
        """Print a final line if a progress line was printed before and work was done since."""
        with self._lock:
            if 0 <= self._printed_done < self.done:
                self._print(self._clock())

    def _print(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        stream = self.stream if self.stream is not None else sys.stderr
        rate_text = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
        print(
            f"{self.label}: {self.done}/{self.total} {self.unit} ({pct:.1f}%), "
            f"{rate_text} {self.unit}/s, elapsed {elapsed:.0f}s, ETA {eta:.0f}s",
            file=stream,
            flush=True,
        )
        self._printed_done = self.done


@contextlib.contextmanager
def heartbeat(label: str, *, interval: Optional[float] = None, stream: Optional[TextIO] = None) -> Iterator[None]:
    """Lines ``label: running, elapsed Ns`` on stderr every ``interval`` seconds (default
    :data:`DEFAULT_INTERVAL`) while the block runs, from a thread: a long stage that counts nothing still shows it
    is alive; a block done sooner prints nothing.

    >>> with heartbeat("report", interval=3600):
    ...     pass
    """
    every = DEFAULT_INTERVAL if interval is None else interval
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            print(
                f"{label}: running, elapsed {time.monotonic() - start:.0f}s",
                file=stream if stream is not None else sys.stderr,
                flush=True,
            )

    thread = threading.Thread(target=beat, name=f"heartbeat {label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
