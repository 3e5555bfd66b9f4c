"""History in SQLite: raw samples for a day, per-minute min/avg/max for a month (both configurable).

Layout (schema version 2), chosen so a GPU-day stays well under 2 MB at 1 Hz even with noisy readings:

- ``recent``: each sample as it arrives, one committed row per interval (a SIGKILL loses at most the
  interval being written; WAL keeps the file consistent).
- ``raw_block``: once a block period (``BLOCK_S``, 10 minutes) is complete its rows become one block
  per GPU in ``codec``'s format (bit-packed integer columns at the stored precision, zlib level 9),
  and its ``rollup_block`` (per minute: n, min, avg, max of each metric, the same format) is written
  in the same transaction that deletes the rows from ``recent``.
- ``meta``: ``schema_version``; ``migrate`` brings an older file forward and refuses a newer one. Also ``kmsg_position``
  (monitor/kmsg.py): the boot and the last kernel log record the monitor read.
  Version 1 stored one zlib-compressed JSON block per minute; migration 2 re-encodes it.
- ``boot``, ``paged``, ``fault`` (version 3, monitor/boots.py): each boot of the host gpuhealth saw
  (``/proc/sys/kernel/random/boot_id``), each alert's last state per boot (a restart of gpuhealth does not
  page again what already paged in this boot), and each fault per GPU per boot (a fault that comes back
  after reboots escalates). A few rows per boot: never compacted, kept as long as the rollups.
- ``ack`` (version 4, monitor/acks.py): what the operator acknowledged (`gpuhealth ack`, serve's API).
- ``correlation`` (version 5, monitor/correlate.py): each time a correlation rule started to hold, shadow rules
  (recorded, never notified) included. Kept as long as the rollups.
- ``reset`` (version 6, monitor/boots.py): each GPU reset (or driver reload) the monitor inferred from its samples,
  per boot: a remediation like a reboot, and what a fault whose action is a GPU reset must survive to escalate.
  Kept as long as the rollups.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from gpuhealth.records import record

from . import codec
from .sample import METRICS, T_MAX, T_MIN, Sample

DAY = 86400.0
BLOCK_S = 600  # one raw block per GPU per 10 minutes: big enough that a block's headers cost little
_V1_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE recent (t REAL NOT NULL, gpu INTEGER NOT NULL, data TEXT NOT NULL)",
    "CREATE INDEX recent_t ON recent (t)",
    "CREATE TABLE raw_block (gpu INTEGER NOT NULL, minute INTEGER NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY (gpu, minute))",
    "CREATE TABLE rollup_block (gpu INTEGER NOT NULL, minute INTEGER NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY (gpu, minute))",
)
_V2_BLOCK_TABLES = (
    "CREATE TABLE raw_block (gpu INTEGER NOT NULL, start INTEGER NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY (gpu, start))",
    "CREATE TABLE rollup_block (gpu INTEGER NOT NULL, start INTEGER NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY (gpu, start))",
)
# Stored precision: history is for trends, and rounding is what keeps a GPU-day small.
_DECIMALS = {"energy_j": 0, "memory_used_mib": 0, "memory_total_mib": 0, "process_memory_mib": 0,
             "memory_reserved_mib": 0}
# Stored in whole steps instead of decimals: PCIe throughput in MiB/s (a noisy 20 ms sample; 1 KiB/s
# resolution would cost 35 bits per sample and column instead of 15).
_STEP = {"pcie_tx_bytes_s": 1 << 20, "pcie_rx_bytes_s": 1 << 20}


class StoreError(RuntimeError):
    """The database cannot be written or read; the message says why and what to do."""


@record
class Series:
    gpu: int
    metric: str
    resolution: str  # "raw" or "minute"
    points: tuple[tuple[float, float, float, float], ...]  # (t, min, avg, max); raw: min == avg == max


def explain(exc: sqlite3.Error, path: Path | str) -> str:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return f"{path}: database is locked by another process (another monitor?); this sample is not stored"
    if "full" in text:
        return f"{path}: disk full; history is not being written (alerts still go out): free space"
    if "not a database" in text or "malformed" in text:
        return f"{path}: not a gpuhealth history database or damaged ({text}); move it aside"
    if "readonly" in text or "unable to open" in text:
        return f"{path}: cannot write ({text}): check permissions or pass --db"
    return f"{path}: {text}"


def _migrate_1(conn: sqlite3.Connection) -> None:
    for statement in _V1_TABLES[1:]:  # meta exists already
        conn.execute(statement)


def _migrate_2(conn: sqlite3.Connection) -> None:
    """Per-minute zlib JSON blocks -> 10-minute codec blocks, streamed one block at a time."""
    conn.execute("ALTER TABLE raw_block RENAME TO raw_block_v1")
    conn.execute("ALTER TABLE rollup_block RENAME TO rollup_block_v1")
    for statement in _V2_BLOCK_TABLES:
        conn.execute(statement)
    for table, encode in (("raw_block", _v1_raw_to_v2), ("rollup_block", _v1_rollup_to_v2)):
        key: tuple[int, int] | None = None
        minutes: list[tuple[int, Any]] = []
        for gpu, minute, blob in conn.execute(f"SELECT gpu, minute, data FROM {table}_v1 ORDER BY gpu, minute"):
            here = (gpu, int(minute * 60 // BLOCK_S * BLOCK_S))
            if here != key and minutes:
                conn.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", (*key, encode(key[1], minutes)))  # type: ignore[misc]
                minutes = []
            key = here
            minutes.append((minute, _v1_unpack(blob)))
        if minutes and key is not None:
            conn.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", (*key, encode(key[1], minutes)))
        conn.execute(f"DROP TABLE {table}_v1")


_V3_TABLES = (
    "CREATE TABLE boot (id TEXT PRIMARY KEY, first_t REAL NOT NULL, last_t REAL NOT NULL)",
    # gpu -1: the host. state: "firing" or "resolved"; t: when it last changed; seen: the newest evidence
    "CREATE TABLE paged (boot TEXT NOT NULL, rule TEXT NOT NULL, gpu INTEGER NOT NULL, key TEXT NOT NULL, "
    "state TEXT NOT NULL, t REAL NOT NULL, PRIMARY KEY (boot, rule, gpu, key))",
    "CREATE TABLE fault (boot TEXT NOT NULL, gpu INTEGER NOT NULL, fault TEXT NOT NULL, t REAL NOT NULL, "
    "PRIMARY KEY (boot, gpu, fault))",
)


# gpu -1: every GPU and the host; until NULL: until cleared (monitor/acks.py)
_V4_TABLES = ("CREATE TABLE ack (code TEXT NOT NULL, gpu INTEGER NOT NULL, until REAL, reason TEXT NOT NULL, "
              "t REAL NOT NULL, PRIMARY KEY (code, gpu))",)


# rule: the correlation row's id (with "/linkN" for a same-link row); gpu -1: several GPUs or the node
_V5_TABLES = ("CREATE TABLE correlation (t REAL NOT NULL, rule TEXT NOT NULL, gpu INTEGER NOT NULL, "
              "shadow INTEGER NOT NULL, action TEXT NOT NULL, message TEXT NOT NULL)",
              "CREATE INDEX correlation_t ON correlation (t)")


# why: what showed it (a counter since the driver loaded went back, a pending retirement cleared)
_V6_TABLES = ("CREATE TABLE reset (boot TEXT NOT NULL, gpu INTEGER NOT NULL, t REAL NOT NULL, why TEXT NOT NULL, "
              "PRIMARY KEY (boot, gpu, t))",)


def _migrate_3(conn: sqlite3.Connection) -> None:
    for statement in _V3_TABLES:
        conn.execute(statement)


def _migrate_4(conn: sqlite3.Connection) -> None:
    for statement in _V4_TABLES:
        conn.execute(statement)


def _migrate_5(conn: sqlite3.Connection) -> None:
    for statement in _V5_TABLES:
        conn.execute(statement)


def _migrate_6(conn: sqlite3.Connection) -> None:
    for statement in _V6_TABLES:
        conn.execute(statement)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1, 2: _migrate_2, 3: _migrate_3,
                                                               4: _migrate_4, 5: _migrate_5, 6: _migrate_6}
SCHEMA_VERSION = max(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the missing migrations in one transaction each; return the schema version."""
    conn.execute(_V1_TABLES[0])
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(f"history schema {version} is newer than this gpuhealth ({SCHEMA_VERSION}); upgrade it")
    if version == 0:  # a new file: the current tables at once
        with conn:
            for statement in _V1_TABLES[1:3] + _V2_BLOCK_TABLES + _V3_TABLES + _V4_TABLES + _V5_TABLES + _V6_TABLES:
                conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return SCHEMA_VERSION
    for target in range(version + 1, SCHEMA_VERSION + 1):
        with conn:
            MIGRATIONS[target](conn)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(target),))
    return SCHEMA_VERSION


def _v1_unpack(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob))


def _round(metric: str, value: Any) -> float | int | None:
    if value is None or not _finite(value):  # the sources refuse these already: never stored all the same
        return None
    if metric in _STEP:
        number = float(round(float(value) / _STEP[metric]) * _STEP[metric])
    else:
        number = round(float(value), _DECIMALS.get(metric, 1))
    return int(number) if number.is_integer() else number


def _values(sample: Sample) -> dict[str, Any]:
    return {m: v for m in METRICS if (v := _round(m, getattr(sample, m))) is not None}


class Store:
    def __init__(self, path: Path | str, raw_keep_s: float = DAY, rollup_keep_s: float = 30 * DAY,
                 clock: Callable[[], float] = time.time, busy_timeout_ms: int = 200,
                 raw_query_max_s: float = 6 * 3600) -> None:
        self.path = path
        self.raw_keep_s = raw_keep_s
        self.rollup_keep_s = rollup_keep_s
        self.raw_query_max_s = raw_query_max_s
        self.clock = clock
        self._minute: int | None = None  # the minute the last write was in (maintenance runs per minute)
        self._retained_at = -math.inf
        try:
            if str(path) != ":memory:":
                from gpuhealth.safefile import check_database

                Path(path).parent.mkdir(parents=True, exist_ok=True)
                check_database(path)  # never a link: SQLite would turn the link's target into a database
            # isolation_level=None: transactions are explicit (`with self._conn`) and short.
            self._conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000, isolation_level=None,
                                         check_same_thread=False)
            self._check_pages(path)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a process crash loses nothing committed
            self._conn.isolation_level = ""  # `with conn` now opens and commits a transaction
            migrate(self._conn)
        except (sqlite3.Error, OSError) as exc:
            from gpuhealth.safefile import UnsafeFile

            text = str(exc) if isinstance(exc, UnsafeFile) else f"{path}: {exc}"  # UnsafeFile names its file
            raise StoreError(explain(exc, path) if isinstance(exc, sqlite3.Error) else text) from exc

    # ---- writing

    def write(self, samples: Sequence[Sample]) -> None:
        """Commit the samples; compact and expire when a minute has passed. StoreError says why not."""
        if not samples:
            return
        try:
            with self._conn:
                self._conn.executemany("INSERT INTO recent VALUES (?, ?, ?)", [
                    (s.t, s.gpu, json.dumps(_values(s), separators=(",", ":"))) for s in samples])
            minute = int(max(s.t for s in samples) // 60)
            if minute != self._minute:
                self._minute = minute
                self.maintain(minute * 60.0)
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def maintain(self, now: float | None = None) -> None:
        """Compact every complete block period in ``recent``; apply retention (at most once a minute)."""
        now = self.clock() if now is None else now
        cutoff = (now // BLOCK_S) * BLOCK_S
        try:
            with self._conn:
                rows = self._conn.execute("SELECT t, gpu, data FROM recent WHERE t < ? ORDER BY t", (cutoff,))
                self._compact(rows.fetchall())
                self._conn.execute("DELETE FROM recent WHERE t < ?", (cutoff,))
            if now - self._retained_at >= 60:
                self._retained_at = now
                with self._conn:  # a block goes once all of it is older than the retention
                    self._conn.execute("DELETE FROM raw_block WHERE start + ? <= ?", (BLOCK_S, now - self.raw_keep_s))
                    self._conn.execute("DELETE FROM rollup_block WHERE start + ? <= ?",
                                       (BLOCK_S, now - self.rollup_keep_s))
                    self._conn.execute("DELETE FROM recent WHERE t < ?", (now - self.raw_keep_s,))
                    # boots, pages and faults: as long as the rollups (escalation looks back that far)
                    self._conn.execute("DELETE FROM boot WHERE last_t < ?", (now - self.rollup_keep_s,))
                    self._conn.execute("DELETE FROM paged WHERE t < ?", (now - self.rollup_keep_s,))
                    self._conn.execute("DELETE FROM fault WHERE t < ?", (now - self.rollup_keep_s,))
                    self._conn.execute("DELETE FROM correlation WHERE t < ?", (now - self.rollup_keep_s,))
                    self._conn.execute("DELETE FROM reset WHERE t < ?", (now - self.rollup_keep_s,))
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def flush(self) -> None:
        """Compact everything, the block in progress too (on SIGTERM): a restart in the same block merges."""
        try:
            with self._conn:
                self._compact(self._conn.execute("SELECT t, gpu, data FROM recent ORDER BY t").fetchall())
                self._conn.execute("DELETE FROM recent")
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def _compact(self, rows: Iterable[tuple[float, int, str]]) -> None:
        groups: dict[tuple[int, int], list[tuple[float, dict[str, Any]]]] = defaultdict(list)
        for t, gpu, data in rows:
            if _placeable(t):  # a row an older gpuhealth stored with a NaN or infinite time is left out
                groups[(gpu, int(t // BLOCK_S) * BLOCK_S)].append((t, _readings(data)))
        for (gpu, start), items in groups.items():
            old = self._conn.execute("SELECT data FROM raw_block WHERE gpu = ? AND start = ?",
                                     (gpu, start)).fetchone()
            if old is not None:  # a restart inside a block that was compacted already: merge
                items = sorted(_block_items(start, old[0]) + items, key=lambda item: item[0])
            self._conn.execute("INSERT OR REPLACE INTO raw_block VALUES (?, ?, ?)",
                               (gpu, start, _block(start, items)))
            self._conn.execute("INSERT OR REPLACE INTO rollup_block VALUES (?, ?, ?)",
                               (gpu, start, _rollup_block(start, _group_minutes(items))))

    # ---- reading

    def gpus(self) -> list[int]:
        rows = self._conn.execute("SELECT DISTINCT gpu FROM rollup_block UNION SELECT DISTINCT gpu FROM recent")
        return sorted(row[0] for row in rows)

    def series(self, gpu: int, metric: str, since: float, until: float | None = None) -> Series:
        """Raw points when the range is short and still within raw retention, else per-minute rollups."""
        until = self.clock() if until is None else until
        raw = until - since <= self.raw_query_max_s and since >= self.clock() - self.raw_keep_s
        try:
            if raw:
                items = self._raw_items(gpu, since, until, metric)
                points = [(t, v, v, v) for t, values in items if (v := values.get(metric)) is not None]
                return Series(gpu, metric, "raw", tuple(points))
            return Series(gpu, metric, "minute", tuple(self._minutes(gpu, metric, since, until)))
        except (sqlite3.Error, codec.CodecError) as exc:
            raise StoreError(explain(exc, self.path) if isinstance(exc, sqlite3.Error)
                             else f"{self.path}: damaged history block ({exc})") from exc

    def _blocks(self, table: str, gpu: int, since: float, until: float) -> list[tuple[int, bytes]]:
        return self._conn.execute(
            f"SELECT start, data FROM {table} WHERE gpu = ? AND start > ? AND start <= ? ORDER BY start",
            (gpu, since - BLOCK_S, until)).fetchall()

    def _recent(self, gpu: int, since: float, until: float) -> list[tuple[float, dict[str, Any]]]:
        return [(t, _readings(data)) for t, data in self._conn.execute(
            "SELECT t, data FROM recent WHERE gpu = ? AND t BETWEEN ? AND ? ORDER BY t", (gpu, since, until))
                if _placeable(t)]

    def _raw_items(self, gpu: int, since: float, until: float, metric: str) -> list[tuple[float, dict[str, Any]]]:
        items: list[tuple[float, dict[str, Any]]] = []
        for start, data in self._blocks("raw_block", gpu, since, until):
            items.extend(_block_items(start, data, metric))
        items.extend(self._recent(gpu, since, until))
        return [(t, v) for t, v in items if since <= t <= until]

    def minute_stats(self, gpu: int, metric: str, since: float, until: float) -> dict[int, list[float]]:
        """Minute number (t // 60) -> [n, min, avg, max] of ``metric``, from rollups and ``recent``.
        StoreError when the history cannot be read."""
        try:
            stats = self._minute_stats(gpu, metric, since, until)
        except (sqlite3.Error, codec.CodecError) as exc:
            raise StoreError(explain(exc, self.path) if isinstance(exc, sqlite3.Error)
                             else f"{self.path}: damaged history block ({exc})") from exc
        first, last = since // 60, until // 60
        return {minute: s for minute, s in sorted(stats.items()) if first <= minute <= last}

    def _minutes(self, gpu: int, metric: str, since: float, until: float) -> list[tuple[float, float, float, float]]:
        first, last = since // 60, until // 60
        stats = self._minute_stats(gpu, metric, since, until)
        return [(minute * 60.0, s[1], s[2], s[3]) for minute, s in sorted(stats.items()) if first <= minute <= last]

    def _minute_stats(self, gpu: int, metric: str, since: float, until: float) -> dict[int, list[float]]:
        stats: dict[int, list[float]] = {}
        for start, data in self._blocks("rollup_block", gpu, since, until):
            for minute, rollup in _rollup_items(start, data, metric):
                stats[minute] = rollup
        # the block still being written lives in `recent`: roll it up on the fly
        by_minute: dict[int, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
        for t, values in self._recent(gpu, since, until):
            by_minute[int(t // 60)].append((t, values))
        for minute, items in by_minute.items():
            if metric in (rollup := _rollups(items)):
                # a restart inside a flushed block: the minute is part block, part `recent` until compacted
                stats[minute] = _combine(stats[minute], rollup[metric]) if minute in stats else rollup[metric]
        return stats

    # ---- boots and faults (monitor/boots.py)

    def _boots(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        try:
            with self._conn:
                return work(self._conn)
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def note_boot(self, boot: str, t: float) -> bool:
        """Record that ``boot`` is running at ``t``; True when this boot is new to the history."""
        def work(conn: sqlite3.Connection) -> bool:
            new = conn.execute("SELECT 1 FROM boot WHERE id = ?", (boot,)).fetchone() is None
            # no UPSERT: SQLite before 3.24 (still in supported distributions) lacks it
            conn.execute("INSERT OR IGNORE INTO boot VALUES (?, ?, ?)", (boot, t, t))
            conn.execute("UPDATE boot SET last_t = max(last_t, ?) WHERE id = ?", (t, boot))
            return new
        return bool(self._boots(work))

    def reboots_since(self, since: float) -> int:
        """Boots gpuhealth first saw at ``since`` or later, less the first boot it ever saw (a first start is not
        a reboot): the reboots of the host in that window."""
        row = self._boots(lambda conn: conn.execute(
            "SELECT COUNT(*) FROM boot WHERE first_t >= ? AND first_t > (SELECT MIN(first_t) FROM boot)",
            (since,)).fetchone())
        return int(row[0])

    def paged_state(self, boot: str, rule: str, gpu: int | None, key: str) -> tuple[str, float] | None:
        """(state, when) of an alert in ``boot`` as the monitor last notified it; None when it never did."""
        row = self._boots(lambda conn: conn.execute(
            "SELECT state, t FROM paged WHERE boot = ? AND rule = ? AND gpu = ? AND key = ?",
            (boot, rule, -1 if gpu is None else gpu, key)).fetchone())
        return None if row is None else (str(row[0]), float(row[1]))

    def paged_keys(self, boot: str, rule: str) -> list[tuple[int | None, str]]:
        """(GPU, key) of every alert of ``rule`` the monitor notified in ``boot``, firing or resolved since."""
        rows = self._boots(lambda conn: conn.execute(
            "SELECT gpu, key FROM paged WHERE boot = ? AND rule = ? ORDER BY gpu, key", (boot, rule)).fetchall())
        return [(None if gpu == -1 else int(gpu), str(key)) for gpu, key in rows]

    def note_paged(self, boot: str, rule: str, gpu: int | None, key: str, state: str, t: float) -> None:
        self._boots(lambda conn: conn.execute("INSERT OR REPLACE INTO paged VALUES (?, ?, ?, ?, ?, ?)",
                                              (boot, rule, -1 if gpu is None else gpu, key, state, t)))

    def note_fault(self, boot: str, gpu: int | None, fault: str, t: float) -> None:
        self._boots(lambda conn: conn.execute("INSERT OR IGNORE INTO fault VALUES (?, ?, ?, ?)",
                                              (boot, -1 if gpu is None else gpu, fault, t)))

    def fault_boots(self, gpu: int | None, fault: str) -> list[str]:
        """The boots in which ``fault`` was seen on ``gpu``, oldest first."""
        rows = self._boots(lambda conn: conn.execute(
            "SELECT boot FROM fault WHERE gpu = ? AND fault = ? ORDER BY t", (-1 if gpu is None else gpu, fault)
        ).fetchall())
        return [str(row[0]) for row in rows]

    def note_reset(self, boot: str, gpu: int, t: float, why: str) -> None:
        self._boots(lambda conn: conn.execute("INSERT OR IGNORE INTO reset VALUES (?, ?, ?, ?)", (boot, gpu, t, why)))

    def resets_since(self, since: float) -> dict[int, int]:
        """GPU -> the resets recorded at ``since`` or later (GPUs without any left out)."""
        rows = self._boots(lambda conn: conn.execute(
            "SELECT gpu, COUNT(*) FROM reset WHERE t >= ? GROUP BY gpu ORDER BY gpu", (since,)).fetchall())
        return {int(gpu): int(count) for gpu, count in rows}

    def resets_after_fault(self, gpu: int, fault: str) -> int:
        """The resets of ``gpu``, in each boot with ``fault`` on it, after the fault was first seen in that boot: the
        resets the fault came back after (or, in an earlier boot, that a reboot followed)."""
        row = self._boots(lambda conn: conn.execute(
            "SELECT COUNT(*) FROM reset JOIN fault ON reset.boot = fault.boot AND reset.gpu = fault.gpu "
            "WHERE fault.gpu = ? AND fault.fault = ? AND reset.t > fault.t", (gpu, fault)).fetchone())
        return int(row[0])

    # ---- acknowledgements (monitor/acks.py)

    def add_ack(self, code: str, gpu: int | None, until: float | None, reason: str, t: float) -> None:
        self._boots(lambda conn: conn.execute("INSERT OR REPLACE INTO ack VALUES (?, ?, ?, ?, ?)",
                                              (code, -1 if gpu is None else gpu, until, reason, t)))

    def clear_ack(self, code: str, gpu: int | None) -> int:
        """Remove the acknowledgement of ``code`` on ``gpu`` (None: the one for every GPU); how many went."""
        cursor = self._boots(lambda conn: conn.execute("DELETE FROM ack WHERE code = ? AND gpu = ?",
                                                       (code, -1 if gpu is None else gpu)))
        return int(cursor.rowcount)

    def acks(self) -> list[tuple[str, int | None, float | None, str, float]]:
        """(code, gpu or None, until or None, reason, when) of every acknowledgement, oldest first."""
        rows = self._boots(lambda conn: conn.execute("SELECT code, gpu, until, reason, t FROM ack ORDER BY t")
                           .fetchall())
        return [(str(c), None if g == -1 else int(g), None if u is None else float(u), str(r), float(t))
                for c, g, u, r, t in rows]

    # ---- correlation rules (monitor/correlate.py)

    def note_correlation(self, t: float, rule: str, gpu: int | None, shadow: bool, action: str, message: str) -> None:
        self._boots(lambda conn: conn.execute("INSERT INTO correlation VALUES (?, ?, ?, ?, ?, ?)",
                                              (t, rule, -1 if gpu is None else gpu, int(shadow), action, message)))

    def correlations(self, since: float = 0.0) -> list[tuple[float, str, int | None, bool, str, str]]:
        """(when, rule, gpu or None, shadow, action, message) of each correlation rule that started to hold."""
        rows = self._boots(lambda conn: conn.execute(
            "SELECT t, rule, gpu, shadow, action, message FROM correlation WHERE t >= ? ORDER BY t", (since,)
        ).fetchall())
        return [(float(t), str(r), None if g == -1 else int(g), bool(s), str(a), str(m)) for t, r, g, s, a, m in rows]

    # ---- small settings the monitor keeps between runs (the kernel log follower's position: monitor/kmsg.py)

    def meta(self, key: str) -> str | None:
        row = self._boots(lambda conn: conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone())
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._boots(lambda conn: conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value)))

    def _check_pages(self, path: Path | str) -> None:
        """``PRAGMA quick_check`` before anything is written: a damaged file is said so (and left alone)
        instead of failing later, sample by sample, or being written further. It reads every page once
        (well under a second for a month of history)."""
        try:
            problems = [str(row[0]) for row in self._conn.execute("PRAGMA quick_check(3)").fetchall()]
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            text = explain(exc, path)
            raise StoreError(text if "malformed" not in str(exc) else
                             f"{path}: history database is damaged ({exc}); move it aside") from exc
        if problems and problems != ["ok"]:
            self._conn.close()
            raise StoreError(f"{path}: history database is damaged ({'; '.join(problems)[:300]}); move it aside "
                             f"(its data may be saved with `sqlite3 {path} .recover`)")

    def integrity(self) -> str:
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        try:
            self._conn.close()
        except sqlite3.Error:
            pass


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _placeable(t: Any) -> bool:
    return _finite(t) and T_MIN <= t <= T_MAX


def _readings(data: str) -> dict[str, Any]:
    """A ``recent`` row's readings, without the NaN and infinite values an older gpuhealth stored (its JSON
    holds ``NaN``/``Infinity``): they crashed the block encoder, `history` and serve's API."""
    try:
        values = json.loads(data)
    except ValueError:
        return {}
    return {k: v for k, v in values.items() if _finite(v)} if isinstance(values, dict) else {}


def _scale(name: str) -> float:
    """Stored integer = value * scale (exact for the power-of-two steps)."""
    return 1 / _STEP[name] if name in _STEP else 10 ** _DECIMALS.get(name, 1)


def _block(start: int, items: list[tuple[float, dict[str, Any]]]) -> bytes:
    """Milliseconds from the block's start, then each metric as an integer at its stored precision."""
    names = sorted({name for _, values in items for name in values})
    columns: dict[str, list[int | None]] = {"t": [round((t - start) * 1000) for t, _ in items]}
    for name in names:
        factor = _scale(name)
        columns[name] = [None if (v := values.get(name)) is None else round(v * factor) for _, values in items]
    return codec.encode(len(items), columns)


def _block_items(start: int, blob: bytes, metric: str | None = None) -> list[tuple[float, dict[str, Any]]]:
    """(t, readings) per sample; only ``metric`` among the readings when given (the rest is not unpacked)."""
    rows, columns = codec.decode(blob, None if metric is None else ("t", metric))
    offsets = columns.pop("t")
    scaled = {name: [None if v is None else _number(v / _scale(name)) for v in column]
              for name, column in columns.items()}
    return [(start + offsets[i] / 1000, {n: column[i] for n, column in scaled.items() if column[i] is not None})
            for i in range(rows) if offsets[i] is not None]


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value


_AVG_SCALE = 100  # averages keep two decimals


def _rollups(items: list[tuple[float, dict[str, Any]]]) -> dict[str, list[float]]:
    """metric -> [n, min, avg, max] over one minute's samples."""
    columns: dict[str, list[float]] = defaultdict(list)
    for _, values in items:
        for name, value in values.items():
            columns[name].append(float(value))
    return {name: [len(v), min(v), round(sum(v) / len(v), 2), max(v)] for name, v in columns.items()}


def _combine(a: list[float], b: list[float]) -> list[float]:
    """Two [n, min, avg, max] of one minute as one."""
    n = a[0] + b[0]
    return [n, min(a[1], b[1]), round((a[0] * a[2] + b[0] * b[2]) / n, 2), max(a[3], b[3])]


def _rollup_block(start: int, minutes: dict[int, dict[str, list[float]]]) -> bytes:
    """One row per minute of the block: the minute's index, then per metric n, min, avg, max."""
    order = sorted(minutes)
    names = sorted({name for stats in minutes.values() for name in stats})
    columns: dict[str, list[int | None]] = {"minute": [m - start // 60 for m in order]}
    for name in names:
        for i, (part, factor) in enumerate((("n", 1), ("min", _scale(name)), ("avg", _AVG_SCALE),
                                            ("max", _scale(name)))):
            columns[f"{name}.{part}"] = [None if (s := minutes[m].get(name)) is None else round(s[i] * factor)
                                         for m in order]
    return codec.encode(len(order), columns)


def _rollup_items(start: int, blob: bytes, metric: str) -> list[tuple[int, list[float]]]:
    names = [f"{metric}.{part}" for part in ("n", "min", "avg", "max")]
    rows, columns = codec.decode(blob, ["minute", *names])
    parts = [columns.get(name) for name in names]
    if any(part is None for part in parts):
        return []
    n, low, mean, high = parts  # type: ignore[misc]
    scale = _scale(metric)
    return [(start // 60 + columns["minute"][i], [n[i], _number(low[i] / scale), _number(mean[i] / _AVG_SCALE),
                                                  _number(high[i] / scale)])
            for i in range(rows) if n[i] is not None]


def _group_minutes(items: list[tuple[float, dict[str, Any]]]) -> dict[int, dict[str, list[float]]]:
    by_minute: dict[int, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    for t, values in items:
        by_minute[int(t // 60)].append((t, values))
    return {minute: _rollups(group) for minute, group in by_minute.items()}


# ---- schema version 1 (read only by the migration)


def _v1_undeltas(deltas: list[int | None]) -> list[int | None]:
    out: list[int | None] = []
    last = 0
    for delta in deltas:
        if delta is not None:
            last += delta
        out.append(None if delta is None else last)
    return out


def _v1_block_items(minute: int, block: dict[str, list[Any]]) -> list[tuple[float, dict[str, Any]]]:
    start = minute * 60.0
    columns = {name: [None if v is None else _number(v / _scale(name)) for v in _v1_undeltas(deltas)]
               for name, deltas in block.items() if name != "t"}
    return [(start + offset / 1000, {n: column[i] for n, column in columns.items() if column[i] is not None})
            for i, offset in enumerate(_v1_undeltas(block["t"])) if offset is not None]


def _v1_raw_to_v2(start: int, minutes: list[tuple[int, Any]]) -> bytes:
    items = [item for minute, block in minutes for item in _v1_block_items(minute, block)]
    return _block(start, sorted(items, key=lambda item: item[0]))


def _v1_rollup_to_v2(start: int, minutes: list[tuple[int, Any]]) -> bytes:
    return _rollup_block(start, {minute: stats for minute, stats in minutes})
