"""Progress: lines with done/total and rate only once the interval has passed, never for quick work.
Time is a fake clock stepped by the tests, so they never sleep and every number in a line is exact."""

import io
import re
import threading
import time

from i6_shard.core.io.progress import Progress

LINE = re.compile(r"^stat: (\d+)/(\d+) files \((\d+\.\d)%\), ([\d,.e+-]+) files/s, elapsed \d+s, ETA (\d+|inf)s$")


class FakeClock:
    """Seconds that pass only when the test says so."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def progress(total: int, interval: float):
    out, clock = io.StringIO(), FakeClock()
    return Progress("stat", total=total, interval=interval, stream=out, clock=clock), out, clock


def test_quick_work_prints_nothing():
    p, out, clock = progress(1000, interval=5)
    for _ in range(1000):
        p.add(1)
        clock.advance(0.004)  # 4 s in all: still within the first interval
    p.close()
    assert out.getvalue() == ""


def test_slow_work_prints_done_total_and_rate_after_the_interval():
    p, out, clock = progress(10, interval=5)
    p.add(1)
    clock.advance(4)
    p.add(0)
    assert out.getvalue() == ""  # not before the first interval has passed
    clock.advance(1)
    p.add(1)
    assert out.getvalue().splitlines() == ["stat: 2/10 files (20.0%), 0.4 files/s, elapsed 5s, ETA 20s"]
    clock.advance(4)
    p.add(3)  # within the interval of the last line: silent
    assert len(out.getvalue().splitlines()) == 1
    clock.advance(1)
    p.add(0)  # due again: 5 done in 10 s
    assert out.getvalue().splitlines()[-1] == "stat: 5/10 files (50.0%), 0.5 files/s, elapsed 10s, ETA 10s"
    clock.advance(2)
    p.add(5)
    p.close()  # a final line, since lines were printed and work was done since
    assert out.getvalue().splitlines()[1:] == [
        "stat: 5/10 files (50.0%), 0.5 files/s, elapsed 10s, ETA 10s",
        "stat: 10/10 files (100.0%), 0.83 files/s, elapsed 12s, ETA 0s",
    ]


def test_the_interval_counts_from_the_last_line_not_from_the_start():
    p, out, clock = progress(100, interval=5)
    for _ in range(20):  # one item per 1.5 s: a line at 6 s, 12 s, 18 s, 24 s, 30 s
        clock.advance(1.5)
        p.add(1)
    elapsed = [int(re.search(r"elapsed (\d+)s", line).group(1)) for line in out.getvalue().splitlines()]
    assert elapsed == [6, 12, 18, 24, 30]


def test_fast_rates_get_thousands_separators():
    p, out, clock = progress(10**6, interval=5)
    clock.advance(10)
    p.add(123_456)
    assert out.getvalue() == "stat: 123456/1000000 files (12.3%), 12,346 files/s, elapsed 10s, ETA 71s\n"


def test_slow_rates_keep_two_significant_digits():
    p, out, clock = progress(10, interval=5)
    clock.advance(7)
    p.add(1)  # 1/7 per second: "0.14", never "0"
    m = LINE.match(out.getvalue().splitlines()[0])
    assert m and m.group(4) == "0.14" and m.group(5) == "63"


def test_no_work_done_has_no_eta():
    p, out, clock = progress(10, interval=5)
    clock.advance(5)
    p.add(0)
    assert out.getvalue() == "stat: 0/10 files (0.0%), 0 files/s, elapsed 5s, ETA infs\n"


def test_counts_from_many_threads_add_up():
    out = io.StringIO()
    p = Progress("stat", total=8000, interval=0, stream=out)  # real clock, a line on every add
    threads = [threading.Thread(target=lambda: [p.add(1) for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.close()
    assert p.done == 8000
    done = [int(LINE.match(line).group(1)) for line in out.getvalue().splitlines()]
    assert done == sorted(done) and done[-1] == 8000 and len(done) == 8000


def test_writes_to_stderr_by_default(capsys):
    p = Progress("stat", total=0, interval=0)
    p.add(0)
    p.close()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("stat: 0/0 files (100.0%)")


def test_close_repeats_no_line_when_nothing_happened_since():
    p, out, clock = progress(2, interval=5)
    clock.advance(5)
    p.add(2)
    clock.advance(1)
    p.close()
    assert out.getvalue().splitlines() == ["stat: 2/2 files (100.0%), 0.4 files/s, elapsed 5s, ETA 0s"]


def test_the_default_clock_is_monotonic():
    assert Progress("stat", total=1)._clock is time.monotonic
