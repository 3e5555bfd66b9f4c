"""History: rollups and retention with an injected clock, schema versions, errors, and SIGKILL."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import zlib

import pytest
from monitor_fakes import T0, Clock, samples

from gpuhealth.monitor import codec
from gpuhealth.monitor.store import _V1_TABLES, BLOCK_S, SCHEMA_VERSION, Store, StoreError


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
    oldest_raw = conn.execute("SELECT min(start) FROM raw_block").fetchone()[0]
    oldest_rollup = conn.execute("SELECT min(start) FROM rollup_block").fetchone()[0]
    # whole blocks expire: one goes once all of it is older than the retention (checked once a minute)
    assert now - 600 - BLOCK_S - 60 <= oldest_raw and oldest_raw + BLOCK_S > now - 600 - 60
    assert now - 3600 - BLOCK_S - 60 <= oldest_rollup and oldest_rollup + BLOCK_S > now - 3600 - 60
    assert store.series(0, "temperature_c", now - 7200, now).resolution == "minute"
    assert 60 <= len(store.series(0, "temperature_c", now - 7200, now).points) <= 62 + BLOCK_S // 60


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
        t += 4  # crosses 10-minute blocks quickly, so compaction transactions get killed too
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
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start + round_ * 2000)],
                                 stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            if int(line) >= kill_after:
                break
        child.send_signal(signal.SIGKILL)
        child.wait(5)
        committed += int(line)
        store = Store(path, clock=Clock(start + 4000))
        assert store.integrity() == "ok"
        stored = len(store.series(0, "temperature_c", start, start + 4000).points)
        assert stored >= committed  # every committed interval survived the kill
        store.close()


def _v1_blob(data) -> bytes:
    """Schema 1's block format (zlib JSON), written here as gpuhealth 0.1's store wrote it."""
    return zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 6)


def _v1_deltas(values):
    out, last = [], 0
    for value in values:
        out.append(None if value is None else value - last)
        last = last if value is None else value
    return out


def test_a_version_1_file_migrates_to_the_current_format(tmp_path):
    path = tmp_path / "h.db"
    conn = sqlite3.connect(path)
    for statement in _V1_TABLES:
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    first = int(T0 // 60)
    for gpu in (0, 1):
        for minute in range(first, first + 15):  # crosses a 10-minute block boundary
            temps = [None if s == 7 else 40 + (minute + s) % 9 for s in range(60)]  # one reading missing
            block = {"t": _v1_deltas([s * 1000 for s in range(60)]), "temperature_c": _v1_deltas(
                [None if v is None else v * 10 for v in temps]), "energy_j": _v1_deltas([minute * 60 + s for s in
                                                                                         range(60)])}
            known = [v for v in temps if v is not None]
            rollup = {"temperature_c": [len(known), min(known), round(sum(known) / len(known), 2), max(known)]}
            conn.execute("INSERT INTO raw_block VALUES (?, ?, ?)", (gpu, minute, _v1_blob(block)))
            conn.execute("INSERT INTO rollup_block VALUES (?, ?, ?)", (gpu, minute, _v1_blob(rollup)))
    conn.execute("INSERT INTO recent VALUES (?, 0, ?)", ((first + 15) * 60 + 1, '{"temperature_c":77.5}'))
    conn.commit()
    conn.close()

    end = (first + 16) * 60
    store = Store(path, clock=Clock(end))
    assert store.integrity() == "ok"
    raw = store.series(0, "temperature_c", first * 60, end).points
    assert len(raw) == 15 * 59 + 1 and raw[0] == (first * 60, 40 + first % 9, 40 + first % 9, 40 + first % 9)
    assert raw[-1][1:] == (77.5, 77.5, 77.5)
    energy = store.series(1, "energy_j", first * 60, end).points
    assert [p[1] for p in energy] == [first * 60 + i for i in range(15 * 60)]
    store.raw_query_max_s = 60
    minutes = store.series(1, "temperature_c", first * 60, end).points
    assert len(minutes) == 15 and minutes[0][0] == first * 60
    known = [40 + (first + s) % 9 for s in range(60) if s != 7]
    assert minutes[0][1:] == (min(known), round(sum(known) / len(known), 2), max(known))
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"meta", "recent", "raw_block", "rollup_block", "boot", "paged", "fault", "ack", "correlation",
                      "reset"}
    assert conn.execute("SELECT count(*) FROM raw_block").fetchone()[0] == 2 * 2  # 15 minutes: two blocks


def test_blocks_round_trip_every_kind_of_column():
    columns = {"same": [5] * 50, "counter": [10**9 + 700 * i for i in range(50)], "two": [1965, 1980] * 25,
               "noisy": [(i * 7919) % 4001 - 2000 for i in range(50)],
               "gaps": [None if i % 3 else i for i in range(50)],
               "none": [None] * 50, "big": [2**62, -(2**62)] * 25}
    rows, decoded = codec.decode(codec.encode(50, columns))
    assert rows == 50 and decoded == columns
    assert codec.decode(codec.encode(0, {"t": []})) == (0, {"t": []})
    with pytest.raises(codec.CodecError):
        codec.decode(b"not zlib")
    with pytest.raises(codec.CodecError, match="format 9"):
        codec.decode(zlib.compress(b"\x09\x00\x00"))


def test_a_constant_column_costs_almost_nothing():
    varying = codec.encode(600, {"t": [i * 1000 for i in range(600)]})
    with_constants = codec.encode(600, {"t": [i * 1000 for i in range(600)],
                                        **{f"c{i}": [81559] * 600 for i in range(10)}})
    assert len(with_constants) - len(varying) < 10 * 12


def test_a_minute_half_compacted_and_half_recent_rolls_up_as_one(tmp_path):
    clock = Clock(T0 + 50)
    store = Store(tmp_path / "h.db", clock=clock)
    store.write(samples(0, 10, temperature_c=50))
    store.flush()  # SIGTERM: the block in progress is compacted
    store.write(samples(0, 10, t0=T0 + 20, temperature_c=lambda i: 60 + i))  # restarted in the same minute
    store.raw_query_max_s = 1
    (minute,) = store.series(0, "temperature_c", T0, T0 + 59).points
    assert minute == (T0, 50, round((50 * 10 + sum(range(60, 70))) / 20, 2), 69)
    assert len(store.series(0, "temperature_c", T0, T0 + 59).points) == 1
    store.raw_query_max_s = 3600
    assert len(store.series(0, "temperature_c", T0, T0 + 59).points) == 20


def test_decoding_only_some_columns_skips_the_others():
    columns = {"t": list(range(0, 6000, 1000)), "a": [1, None, 3, None, 5, 6], "b": [7] * 6, "c": [1, 2] * 3}
    blob = codec.encode(6, columns)
    assert codec.decode(blob, ["t", "c"]) == (6, {"t": columns["t"], "c": columns["c"]})
    assert codec.decode(blob, ["a"]) == (6, {"a": columns["a"]})


def test_reserved_memory_and_pcie_throughput_are_stored_processes_only_as_count_and_total(tmp_path):
    clock = Clock()
    store = Store(tmp_path / "h.db", clock=clock)
    batch = samples(0, 30, memory_reserved_mib=613, pcie_tx_bytes_s=lambda i: 2**20 * (1000 + i) + 1024 * i,
                    pcie_rx_bytes_s=None, process_count=2, process_memory_mib=39936.0,
                    processes=((4242, 39936.0), (77, None)))
    for sample in batch:
        clock.t = sample.t
        store.write([sample])
    store.flush()  # into a codec block: new metrics are new columns, no schema change
    tx = store.series(0, "pcie_tx_bytes_s", T0, T0 + 60)
    # stored in whole MiB/s
    assert tx.resolution == "raw" and [p[1] for p in tx.points] == [2**20 * (1000 + i) for i in range(30)]
    assert {p[1] for p in store.series(0, "memory_reserved_mib", T0, T0 + 60).points} == {613}
    assert store.series(0, "pcie_rx_bytes_s", T0, T0 + 60).points == ()
    assert {p[1] for p in store.series(0, "process_count", T0, T0 + 60).points} == {2}
    store.raw_query_max_s = 1
    assert store.series(0, "memory_reserved_mib", T0, T0 + 60).points[0][1:] == (613, 613, 613)
    (blob,) = sqlite3.connect(tmp_path / "h.db").execute("SELECT data FROM raw_block").fetchone()
    assert "processes" not in codec.decode(blob)[1] and SCHEMA_VERSION == 6  # 3-6: boots, acks, correlations, resets
