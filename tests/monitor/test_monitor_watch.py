"""`gpuhealth watch`: the pure render function read back as text at 80 columns, the state it renders,
and the command on a generated trace (a bounded number of steps) and under SIGTERM."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from click.testing import CliRunner
from monitor_fakes import GENERATED_BY, NOTE, T0, busy, samples
from rich.console import Console

from gpuhealth.monitor.commands import stop_on_signals, watch
from gpuhealth.monitor.rules import Alert
from gpuhealth.monitor.sample import GpuLost, Sample, XidEvent
from gpuhealth.monitor.sources import write_trace
from gpuhealth.monitor.watch import EMPTY, FULL, WatchState, bar, render

H100 = dict(temperature_c=61, temperature_slowdown_c=87, power_w=350.4, power_limit_w=700, utilization_gpu_pct=97,
            memory_used_mib=40 * 1024, memory_total_mib=80 * 1024)


def _text(state: WatchState, width: int = 80) -> str:
    console = Console(record=True, width=width, file=open("/dev/null", "w"))  # noqa: SIM115 - closed with it
    console.print(render(state, width))
    text = console.export_text()
    console.file.close()
    return text


def test_two_lines_per_gpu_with_bars_against_their_limits_and_the_alerts_below():
    state = WatchState("nvml")
    state.update([Sample(T0, 0, **H100), Sample(T0, 1, **{**H100, "temperature_c": 87, "power_w": 700}),
                  GpuLost(T0, 2, "GPU is lost")],
                 [Alert("temperature", 1, "warning", "firing", "GPU 1 at 87 °C (alert at 82 °C)", T0),
                  Alert("xid", 2, "critical", "firing", "GPU 2 Xid 79 (fell off the bus)", T0, "79"),
                  Alert("gpu_count", None, "critical", "firing", "2 GPU(s) answering, 3 expected", T0)])
    lines = _text(state).splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("gpuhealth watch  nvml  2023-11-14 22:13:00Z  3 GPU(s)")
    gpu0, gpu0_second, gpu1, gpu1_second, lost = lines[1:6]
    assert gpu0.startswith("GPU 0  util ") and gpu0.endswith(" 97 %   mem " + FULL * 10 + EMPTY * 9 + "  40.0/80 GiB")
    assert " 61/87 °C   pwr " in gpu0_second and gpu0_second.endswith(" 350/700 W")
    assert "temp " + FULL * 19 + "  87/87 °C" in gpu1_second and "pwr " + FULL * 19 + "  700/700 W" in gpu1_second
    assert gpu1.startswith("GPU 1") and lost == "GPU 2  LOST GPU is lost"
    assert lines[7] == "Alerts (3)"
    assert lines[8].startswith("critical gpu_count host: 2 GPU(s) answering")  # host-wide first, then by GPU
    assert lines[9].startswith("critical xid[79] gpu=2: GPU 2 Xid 79")
    assert lines[10].startswith("warning  temperature gpu=1: GPU 1 at 87 °C")


def test_resolved_alerts_leave_and_a_gpu_that_answers_again_is_no_longer_lost():
    state = WatchState("smi")
    firing = Alert("gpu_lost", 0, "critical", "firing", "GPU 0 lost: no answer", T0)
    state.update([GpuLost(T0, 0, "no answer")], [firing])
    assert "LOST" in _text(state) and "Alerts (1)" in _text(state)
    state.update([Sample(T0 + 30, 0, **H100)], [Alert("gpu_lost", 0, "critical", "resolved", "resolved", T0 + 30)])
    text = _text(state)
    assert "LOST" not in text and "No active alerts" in text and "22:13:30Z" in text and state.steps == 2


def test_unknown_readings_show_as_question_marks_and_empty_bars():
    state = WatchState("replay:x")
    state.update([Sample(T0, 0, temperature_c=45)], [])  # no slowdown threshold: scaled to 100 °C
    first, second = _text(state).splitlines()[1:3]
    assert "util " + EMPTY * 19 + "   ? %" in first and "   ?/? GiB" in first
    assert "temp " + FULL * 9 + EMPTY * 10 + "  45 °C" in second and "   ?/? W" in second


def test_the_view_fits_narrow_and_uses_wide_terminals():
    state = WatchState("nvml")
    state.update([Sample(T0, 0, **{**H100, "memory_total_mib": 141 * 1024, "power_limit_w": 1000})],
                 [Alert("hung_job", 0, "warning", "firing", "GPU 0 at 0 % utilisation while 1 process(es) hold "
                        "40000 MiB: a hung job? " * 3, T0)])
    assert all(len(line) <= 80 for line in _text(state, 80).splitlines())
    assert all(len(line) <= 60 for line in _text(state, 60).splitlines())
    assert FULL * 25 in _text(state, 120) and bar(None, 4).plain == EMPTY * 4


def _trace(tmp_path, seconds=60):
    events = samples(0, seconds, **busy(temperature_c=lambda i: 90 if i >= 5 else 60, power_limit_w=700,
                                        memory_total_mib=81559, temperature_slowdown_c=87))
    events += samples(1, seconds, **busy(power_limit_w=700, memory_total_mib=81559))
    events += [XidEvent(T0 + 10, 1, 79)]
    path = tmp_path / "watch.jsonl"
    write_trace(path, sorted(events, key=lambda e: e.t), GENERATED_BY, NOTE)
    return path


def test_watch_replays_a_trace_for_a_bounded_number_of_steps(tmp_path):
    trace = _trace(tmp_path)
    args = ["--source", f"replay:{trace}", "--replay-speed", "0", "--interval", "0.05"]
    early = CliRunner().invoke(watch, [*args, "--steps", "3"])
    assert early.exit_code == 0, early.output
    assert "GPU 0  util" in early.output and "GPU 1  util" in early.output and "No active alerts" in early.output
    later = CliRunner().invoke(watch, [*args, "--steps", "50"])
    assert later.exit_code == 0, later.output
    lines = later.output.splitlines()
    assert "Alerts (2)" in lines and all(len(line) <= 80 for line in lines)
    assert any(line.startswith("critical xid[79] gpu=1") for line in lines)
    assert any(line.startswith("warning  temperature gpu=0: GPU 0 at 90 °C") for line in lines)
    ended = CliRunner().invoke(watch, args)  # no --steps: a replay ends with its trace
    assert ended.exit_code == 0 and "Alerts (2)" in ended.output
    bad = CliRunner().invoke(watch, ["--source", "bogus"])
    assert bad.exit_code == 3 and "unknown source" in bad.output


_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _drain(fd: int, out: bytearray, until: Callable[[], bool], deadline_s: float) -> None:
    """Read the terminal's output into ``out`` until ``until()`` or the deadline (the child never blocks on a
    full terminal buffer meanwhile); a closed terminal (EIO once the child is gone) ends it too."""
    end = time.monotonic() + deadline_s
    while not until() and time.monotonic() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            out += chunk


def test_sigterm_exits_zero(tmp_path):
    """SIGTERM while watch shows samples: exit 0. On a terminal watch redraws at every poll (into a pipe rich
    writes only the last frame, at exit), so the test sends the signal once a GPU's row is on screen: a fixed
    sleep raced the first poll on a loaded machine, and the last frame then had no GPU in it."""
    trace = _trace(tmp_path, seconds=600)
    code = "from gpuhealth.monitor.commands import watch; watch()"
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", code, "--source", f"replay:{trace}", "--interval", "0.05"],
                             stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                             env={**os.environ, "COLUMNS": "80", "LINES": "25"})
    os.close(slave)
    out = bytearray()
    try:
        _drain(master, out, lambda: b"GPU 0  util" in _ANSI.sub(b"", bytes(out)), 60)
        assert b"GPU 0  util" in _ANSI.sub(b"", bytes(out)), bytes(out[-500:])
        child.send_signal(signal.SIGTERM)
        _drain(master, out, lambda: child.poll() is not None, 30)
        assert child.wait(5) == 0, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stderr.close()
        os.close(master)


def _handler_returns_while_the_event_lock_is_held(handler: Callable[..., Any], stop: threading.Event) -> bool:
    """Whether ``handler`` returns while ``stop``'s lock is held, as the main thread holds it for a few bytecodes
    of every ``stop.wait`` (CPython's Event: a Condition over a plain Lock), where a signal may land."""
    call = threading.Thread(target=handler, args=(signal.SIGTERM, None), daemon=True)
    with stop._cond:  # noqa: SLF001 - the lock Event.wait holds
        call.start()
        call.join(1)
        returned = not call.is_alive()
    call.join(5)
    return returned


def test_sigterm_while_the_loop_holds_the_stop_events_lock_cannot_deadlock():
    # Why watch and monitor sometimes hung on SIGTERM (the flaky test_sigterm_exits_zero): their handler was
    # `stop.set()`, which takes the lock that the interrupted main thread may be holding.
    stop = threading.Event()
    assert not _handler_returns_while_the_event_lock_is_held(lambda *_: stop.set(), stop)  # the old handler
    stop, before = threading.Event(), signal.getsignal(signal.SIGTERM)
    restore = stop_on_signals(stop)
    try:
        assert _handler_returns_while_the_event_lock_is_held(signal.getsignal(signal.SIGTERM), stop)
        assert stop.wait(5)  # and the loop is still told to stop
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is before
