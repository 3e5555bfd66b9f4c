"""NvmlSource against fake NVML modules, SmiSource against a fake nvidia-smi, replay and record."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from types import SimpleNamespace

import pytest
from monitor_fakes import GENERATED_BY, NOTE, T0, Clock, FakeNvml, FakeNVMLError, samples

from gpuhealth.monitor.sample import GpuLost, Sample, XidEvent, from_record, to_record
from gpuhealth.monitor.sources import (
    NvmlSource,
    ReplaySource,
    SmiSource,
    SourceError,
    TraceWriter,
    read_trace,
    write_trace,
)


def test_nvml_samples_every_field_the_gpu_supports():
    fake = FakeNvml(gpus=2)
    source = NvmlSource(fake, clock=Clock())
    first, second = source.poll()
    assert isinstance(first, Sample) and (first.gpu, second.gpu) == (0, 1)
    assert first.pci_address == "0000:19:00.0" and first.uuid.startswith("GPU-00000000")
    assert first.temperature_c == 41 and first.power_w == 301.234 and first.power_limit_w == 700
    assert first.energy_j == 123456.789 and first.utilization_gpu_pct == 97 and first.memory_used_mib == 40960
    assert first.sm_clock_mhz == 1980 and first.pcie_gen == 5 and first.remapped_rows_pending is False
    assert first.process_count == 1 and first.process_memory_mib == 39 * 1024
    assert first.temperature_slowdown_c == 87 and first.fan_pct is None and first.retired_pages_pending is None
    source.close()


def test_retired_page_and_remapped_row_counts_are_sampled_the_page_list_only_while_pending():
    fake = FakeNvml(gpus=1)
    fake.remapped = (2, 1, 1, 0)
    fake.retired = {0: [], 1: []}
    source = NvmlSource(fake, clock=Clock())
    (sample,) = source.poll()
    assert (sample.remapped_rows, sample.remapped_rows_pending) == (3, True)
    assert (sample.retired_pages_pending, sample.retired_pages) == (False, None)
    assert fake.calls["retired_pages"] == 0  # nothing pending: the page lists are not read
    fake.retired = {0: [0x1000, 0x2000], 1: [0x3000]}
    (sample,) = source.poll()
    assert (sample.retired_pages_pending, sample.retired_pages) == (True, 3)
    source.close()


def test_an_unsupported_field_is_asked_once_per_gpu():
    fake = FakeNvml(gpus=2)
    source = NvmlSource(fake, clock=Clock())
    for _ in range(5):
        source.poll()
    assert fake.calls["fan"] == 2  # once per GPU, never again
    assert source.unsupported[0] >= {"fan", "retired_pages", "memory_temperature"}  # no nvmlDeviceGetFieldValues
    source.close()


def test_memory_reserved_pcie_throughput_and_per_process_memory_when_supported():
    fake = FakeNvml(gpus=1)
    fake.processes = [SimpleNamespace(pid=4242, usedGpuMemory=39 * 1024**3),
                      SimpleNamespace(pid=77, usedGpuMemory=None)]  # None: the driver does not say
    source = NvmlSource(fake, clock=Clock())
    (sample,) = source.poll()
    assert sample.memory_reserved_mib == 613 and sample.memory_used_mib == 40960
    assert sample.pcie_tx_bytes_s == 1_250_000 * 1024 and sample.pcie_rx_bytes_s == 250_000 * 1024
    assert sample.processes == ((4242, 39 * 1024), (77, None))
    assert sample.process_count == 2 and sample.process_memory_mib == 39 * 1024
    assert not source.unsupported[0] & {"memory_reserved", "pcie_throughput", "processes"}
    record = json.loads(json.dumps(to_record(sample)))
    assert record["processes"] == [[4242, 39 * 1024], [77, None]] and from_record(record) == sample
    source.close()


@pytest.mark.parametrize("reader", ["memory_reserved", "pcie_throughput", "processes"])
def test_new_fields_not_supported_are_asked_once_per_gpu(reader):
    fake = FakeNvml(gpus=2)
    fake.unsupported = {reader}
    source = NvmlSource(fake, clock=Clock())
    for _ in range(4):
        events = source.poll()
    assert fake.calls[reader] == 2 and all(reader in source.unsupported[g] for g in (0, 1))
    fields = {"memory_reserved": ("memory_reserved_mib",), "pcie_throughput": ("pcie_tx_bytes_s", "pcie_rx_bytes_s"),
              "processes": ("processes", "process_count", "process_memory_mib")}[reader]
    assert all(getattr(e, name) is None for e in events for name in fields)
    assert events[0].memory_used_mib == 40960 and events[0].temperature_c == 41  # the rest still read
    source.close()


def test_memory_reserved_is_unsupported_on_a_library_without_memory_info_v2():
    class OldNvml(FakeNvml):
        nvmlMemory_v2 = None  # noqa: N815 - an nvidia-ml-py from before the v2 struct

    fake = OldNvml(gpus=1)
    source = NvmlSource(fake, clock=Clock())
    (sample,) = source.poll()
    assert "memory_reserved" in source.unsupported[0] and sample.memory_reserved_mib is None
    assert sample.memory_used_mib == 40960
    source.close()


def test_memory_reserved_through_a_module_that_names_the_v2_call():
    class V2Nvml(FakeNvml):
        nvmlMemory_v2 = None  # noqa: N815

        def nvmlDeviceGetMemoryInfo_v2(self, handle):  # noqa: N802
            return SimpleNamespace(total=80 * 1024**3, reserved=512 * 1024**2, used=1024**3)

    source = NvmlSource(V2Nvml(gpus=1), clock=Clock())
    assert source.poll()[0].memory_reserved_mib == 512
    source.close()


def test_a_lost_gpu_yields_gpu_lost_and_the_others_keep_being_sampled():
    fake = FakeNvml(gpus=3)
    fake.lost = {1}
    source = NvmlSource(fake, clock=Clock())
    events = source.poll()
    assert [type(e).__name__ for e in events] == ["Sample", "GpuLost", "Sample"]
    assert "GPU is lost" in events[1].reason and source.connected
    source.close()


def test_a_hanging_call_is_bounded_by_the_timeout_and_other_gpus_answer():
    fake = FakeNvml(gpus=2)
    fake.hang = {0}
    source = NvmlSource(fake, timeout=0.2, clock=Clock())
    started = time.monotonic()
    events = source.poll()
    assert time.monotonic() - started < 2
    assert isinstance(events[0], GpuLost) and "did not answer within 0.2 s" in events[0].reason
    assert isinstance(events[1], Sample)
    started = time.monotonic()
    again = source.poll()  # still hung: reported at once, no new call piles up behind it
    assert time.monotonic() - started < 1 and isinstance(again[0], GpuLost)
    assert fake.calls["temperature"] == 3  # GPU 0 once (still hung), GPU 1 twice
    fake.hang.clear()
    fake.release.set()
    time.sleep(0.05)
    assert all(isinstance(e, Sample) for e in source.poll())
    source.close()


def test_init_failure_reconnects_with_back_off_and_the_session_comes_back():
    fake = FakeNvml(gpus=1)
    fake.init_error = FakeNVMLError(9, "Driver Not Loaded")
    clock = Clock()
    source = NvmlSource(fake, clock=clock, backoff=(1, 4))
    assert source.poll() == [] and source.last_error == "Driver Not Loaded"
    clock.t += 0.5
    source.poll()
    assert fake.calls["init"] == 1  # not before the back-off
    for _ in range(3):
        clock.t += 10
        source.poll()
    assert fake.calls["init"] == 4
    fake.init_error = None
    clock.t += 10
    assert isinstance(source.poll()[0], Sample) and source.connected
    source.close()


def test_driver_unloaded_mid_run_every_gpu_lost_then_reconnects():
    fake = FakeNvml(gpus=2)
    clock = Clock()
    source = NvmlSource(fake, clock=clock, backoff=(1, 60))
    assert len(source.poll()) == 2
    fake.lost = {0, 1}
    lost = source.poll()
    assert [type(e) for e in lost] == [GpuLost, GpuLost] and not source.connected
    fake.lost = set()
    clock.t += 1
    assert [type(e) for e in source.poll()] == [Sample, Sample] and fake.calls["init"] == 2
    source.close()


def test_xid_events_from_the_event_api():
    fake = FakeNvml(gpus=2)
    fake.xids = [(1, 79)]
    events = NvmlSource(fake, clock=Clock()).poll()
    assert XidEvent(T0, 1, 79) in events


def test_nvml_not_installed_is_a_source_error():
    class NoLibrary:
        def nvmlInit(self):  # noqa: N802
            raise SourceError("nvidia-ml-py not importable: no module")

    with pytest.raises(SourceError):
        NvmlSource(NoLibrary()).connect()


# --------------------------------------------------------------------------- nvidia-smi

FAKE_SMI = """#!/bin/sh
# fake nvidia-smi for tests: prints CSV rows for 2 GPUs every -lms milliseconds
echo "$@" >> "{args}"
n=0
while [ $n -lt {rows} ]; do
  echo "0, 00000000:19:00.0, GPU-aaaa, 45, 50, 120.5, 700.00, 33, 10, 1000,81559,1980,2619,0x40,0,0,No,5,16,[N/A],512"
  echo "1, 00000000:3B:00.0, GPU-bbbb, 46, 51, 121.5, 700.00, 34, 11, 1000,81559,1980,2619,0x1,0,2,No,5,16,[N/A],[N/A]"
  n=$((n + 1))
  sleep 0.02
done
{tail}
"""


def _fake_smi(tmp_path, rows=3, tail=""):
    script = tmp_path / "nvidia-smi"
    script.write_text(FAKE_SMI.format(args=tmp_path / "args", rows=rows, tail=tail))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _poll_until(source, count, limit=5.0):
    events, deadline = [], time.monotonic() + limit
    while len(events) < count and time.monotonic() < deadline:
        events += source.poll()
        time.sleep(0.01)
    return events


def test_smi_source_streams_and_parses_rows(tmp_path):
    source = SmiSource(0.02, command=str(_fake_smi(tmp_path)), clock=Clock())
    events = _poll_until(source, 2)
    source.close()
    first, second = events[:2]
    assert (first.gpu, first.pci_address, first.temperature_c, first.power_w) == (0, "0000:19:00.0", 45, 120.5)
    assert first.clock_event_reasons == 0x40 and second.clock_event_reasons == 0x1
    assert first.sm_clock_mhz == 1980 and second.ecc_volatile_corrected == 2 and first.fan_pct is None
    assert first.memory_reserved_mib == 512 and second.memory_reserved_mib is None
    assert first.pcie_tx_bytes_s is None and first.processes is None  # not in nvidia-smi's --query-gpu
    args = (tmp_path / "args").read_text()
    assert "--format=csv,noheader,nounits" in args and "-lms 20" in args


def test_smi_source_restarts_a_process_that_died(tmp_path):
    clock = Clock()
    source = SmiSource(0.02, command=str(_fake_smi(tmp_path, rows=1)), clock=clock, backoff=(1, 8))
    events = _poll_until(source, 2)
    deadline = time.monotonic() + 5
    while source._proc is not None and time.monotonic() < deadline:
        source.poll()
        time.sleep(0.01)
    clock.t += 1
    events += _poll_until(source, 2)
    source.close()
    assert source.starts == 2 and len(events) >= 4


def test_smi_source_drops_a_field_this_nvidia_smi_rejects(tmp_path):
    tail = 'echo \'Field "temperature.memory" is not a valid field to query.\' >&2; exit 2'
    script = tmp_path / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncase "$*" in *temperature.memory*) {tail};; esac\n'
                      'echo "0, 00000000:19:00.0, GPU-a, 45"; sleep 5\n')
    script.chmod(0o755)
    source = SmiSource(0.02, command=str(script), fields=("index", "pci.bus_id", "uuid", "temperature.memory",
                                                            "temperature.gpu"), clock=Clock())
    events = _poll_until(source, 1)
    source.close()
    assert "temperature.memory" not in source.fields and events[0].temperature_c == 45


def test_smi_source_that_stalls_is_killed_and_reports_lost_gpus(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\necho "0, 00000000:19:00.0, GPU-a, 45"\nexec sleep 60\n')
    script.chmod(0o755)
    clock = Clock()
    source = SmiSource(1, command=str(script), fields=("index", "pci.bus_id", "uuid", "temperature.gpu"),
                       clock=clock, stall_s=10)
    assert _poll_until(source, 1)
    pid = source._proc.pid
    clock.t += 11
    lost = source.poll()
    assert [type(e) for e in lost] == [GpuLost] and "printed nothing" in lost[0].reason
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --------------------------------------------------------------------------- traces


def test_record_then_replay_round_trips_every_event(tmp_path):
    events = samples(0, 3, temperature_c=50.5, clock_event_reasons=0x40) + [
        GpuLost(T0 + 3, 1, "GPU is lost"), XidEvent(T0 + 3, 1, 79)]
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path, GENERATED_BY, NOTE)
    writer.write(events)
    writer.close()
    header, replayed = read_trace(path)
    assert header["generated_by"] == GENERATED_BY and list(replayed) == events
    assert from_record(json.loads(json.dumps(to_record(events[0])))) == events[0]


def test_replay_paces_by_the_clock_and_rebases_to_now(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path, GENERATED_BY, NOTE)
    writer.write(samples(0, 10, temperature_c=50))
    writer.close()
    clock = Clock(T0 + 1000)
    source = ReplaySource(path, clock=clock, speed=1.0)
    assert [e.t for e in source.poll()] == [T0 + 1000]
    clock.t += 4
    assert len(source.poll()) == 4 and not source.exhausted
    clock.t += 100
    assert len(source.poll()) == 5 and source.exhausted


def test_a_fast_replay_ends_at_now_and_is_not_paced_by_the_interval(tmp_path):
    from gpuhealth.monitor.daemon import Monitor
    from gpuhealth.monitor.notify import Dispatcher
    from gpuhealth.monitor.rules import RuleSet
    from gpuhealth.monitor.store import Store

    path = tmp_path / "t.jsonl"
    write_trace(path, samples(0, 60, step=1.0, temperature_c=lambda i: 40 + i), GENERATED_BY, NOTE)
    clock = Clock(T0 + 10_000)
    source = ReplaySource(path, clock=clock, speed=0)
    assert not source.paced
    first = source.poll()
    assert [e.t for e in first] == [T0 + 10_000 - 59]  # the last sample will be "now": nothing in the future
    store = Store(tmp_path / "h.db", clock=time.time)
    now = time.time()
    monitor = Monitor(ReplaySource(path, speed=0), RuleSet([]), Dispatcher([]), store, interval=1.0)
    started = time.monotonic()
    monitor.run(threading.Event())
    assert time.monotonic() - started < 10 and monitor.steps == 60  # paced by 1 s it would take 59 s
    series = store.series(0, "temperature_c", now - 3600, now + 1)  # `history --since 1h` right after
    store.close()
    assert [p[2] for p in series.points] == [40 + i for i in range(60)]
    assert now - 60 <= series.points[0][0] and series.points[-1][0] <= now + 1


def test_replay_refuses_a_file_that_is_not_a_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"kind": "sample", "t": 1, "gpu": 0}\n')
    with pytest.raises(ValueError, match="not a gpuhealth trace"):
        ReplaySource(path)


def test_a_replay_faster_than_real_time_never_dates_a_sample_after_it_is_played(tmp_path):
    """At speed 10 the trace keeps its own 1 s steps (for-durations stay true) and its last sample is
    dated when the replay ends, so the dashboard and `history` show no future samples."""
    path = tmp_path / "t.jsonl"
    write_trace(path, samples(0, 100, step=1.0, temperature_c=50), GENERATED_BY, NOTE)
    clock = Clock(T0 + 5000)
    source = ReplaySource(path, clock=clock, speed=10.0)
    played: list[float] = []
    while not source.exhausted:
        batch = source.poll()
        assert all(event.t <= clock.t for event in batch), (clock.t, [e.t for e in batch])
        played += [event.t for event in batch]
        clock.t += 1
    assert len(played) == 100 and all(b - a == 1.0 for a, b in zip(played, played[1:], strict=False))
    assert played[-1] == T0 + 5000 + 99 / 10  # the last sample: the moment the replay reaches it
