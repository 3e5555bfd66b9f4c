"""History: rollups and retention with an injected clock, schema versions, errors, and SIGKILL."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from monitor_fakes import T0, Clock, samples

from gpuhealth.monitor.store import SCHEMA_VERSION, Store, StoreError


def _fill(store: Store, clock: Clock, minutes: int, gpu: int = 0, step: float = 1.0) -> None:
    for batch in range(int(minutes * 60 / step)):
        sample = samples(gpu, 1, t0=T0 + batch * step, temperature_c=40 + batch % 10, power_w=100.26)[0]
        clock.t = sample.t
        store.write([sample])


def test_minutes_roll_up_into_min_avg_max_and_raw_points_stay_exact(tmp_path):
    clock = Clock()
    store = Store(tmp_path / "h.db", clock=clock)
    _fill(store, clock, 3)
    raw = store.series(0, "temperature_c", T0, T0 + 180)
    assert raw.resolution == "raw" and len(raw.points) == 180 and raw.points[3] == (T0 + 3, 43, 43, 43)
    store.raw_query_max_s = 60  # force rollups for this range
    minutes = store.series(0, "power_w", T0, T0 + 180)
    assert minutes.resolution == "minute" and len(minutes.points) == 3
    temps = store.series(0, "temperature_c", T0, T0 + 180).points
    assert temps[0] == (T0, 40, 44.5, 49) and store.integrity() == "ok"


def test_raw_expires_after_its_retention_and_rollups_after_theirs(tmp_path):
    clock = Clock()
    store = Store(tmp_path / "h.db", raw_keep_s=600, rollup_keep_s=3600, clock=clock)
    _fill(store, clock, 120, step=30)
    now = clock.t
    conn = sqlite3.connect(tmp_path / "h.db")
    oldest_raw = conn.execute("SELECT min(minute) FROM raw_block").fetchone()[0]
    oldest_rollup = conn.execute("SELECT min(minute) FROM rollup_block").fetchone()[0]
    assert (now - oldest_raw * 60) <= 600 + 60 and (now - oldest_rollup * 60) <= 3600 + 60
    assert store.series(0, "temperature_c", now - 7200, now).resolution == "minute"
    assert len(store.series(0, "temperature_c", now - 7200, now).points) in (60, 61, 62)


def test_a_restart_inside_a_compacted_minute_merges(tmp_path):
    clock = Clock()
    store = Store(tmp_path / "h.db", clock=clock)
    store.write(samples(0, 10, temperature_c=50))
    store.maintain(T0 + 120)
    store.write(samples(0, 10, t0=T0 + 20, temperature_c=60))
    store.maintain(T0 + 120)
    assert len(store.series(0, "temperature_c", T0, T0 + 60, ).points) == 20


def test_schema_is_versioned_and_a_newer_file_is_refused(tmp_path):
    Store(tmp_path / "h.db").close()
    conn = sqlite3.connect(tmp_path / "h.db")
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    with pytest.raises(StoreError, match="newer than this gpuhealth"):
        Store(tmp_path / "h.db")


def test_a_locked_database_is_a_clear_error_and_the_next_write_works(tmp_path):
    store = Store(tmp_path / "h.db", busy_timeout_ms=10)
    locker = sqlite3.connect(tmp_path / "h.db", isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    with pytest.raises(StoreError, match="locked by another process"):
        store.write(samples(0, 1))
    locker.execute("ROLLBACK")
    store.write(samples(0, 1))


def test_not_a_database_is_a_clear_error(tmp_path):
    (tmp_path / "h.db").write_text("hello" * 1000)
    with pytest.raises(StoreError, match="not a gpuhealth history database"):
        Store(tmp_path / "h.db")


WRITER = textwrap.dedent("""
    import sys, time
    from gpuhealth.monitor.sample import Sample
    from gpuhealth.monitor.store import Store
    store = Store(sys.argv[1])
    t = float(sys.argv[2])
    n = 0
    while True:
        t += 0.5  # crosses minutes quickly, so compaction transactions get killed too
        store.write([Sample(t, g, temperature_c=40 + n % 7, power_w=200.5) for g in range(8)])
        n += 1
        print(n, flush=True)
""")


@pytest.mark.parametrize("kill_after", [150, 330])
def test_sigkill_mid_write_leaves_a_consistent_database(tmp_path, kill_after):
    path = tmp_path / "h.db"
    start = T0
    committed = 0
    for round_ in range(2):  # killed twice, the second time on top of the first crash
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start + round_ * 1000)],
                                 stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            if int(line) >= kill_after:
                break
        child.send_signal(signal.SIGKILL)
        child.wait(5)
        committed += int(line)
        store = Store(path, clock=Clock(start + 3000))
        assert store.integrity() == "ok"
        stored = len(store.series(0, "temperature_c", start, start + 3000).points)
        assert stored >= committed  # every committed interval survived the kill
        store.close()
