"""History in SQLite: raw samples for a day, per-minute min/avg/max for a month (both configurable).

Layout (schema version 1), chosen so a GPU-day stays near 1.5 MB at 1 Hz:

- ``recent``: each sample as it arrives, one committed row per interval (a SIGKILL loses at most the
  interval being written; WAL keeps the file consistent).
- ``raw_block``: once a minute is complete its rows become one zlib-compressed JSON block per GPU
  (columns of values), and its ``rollup_block`` (metric -> n, min, avg, max) is written in the same
  transaction that deletes the rows from ``recent``.
- ``meta``: ``schema_version``; ``migrate`` brings an older file forward and refuses a newer one.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sample import METRICS, Sample

DAY = 86400.0
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE recent (t REAL NOT NULL, gpu INTEGER NOT NULL, data TEXT NOT NULL)",
        "CREATE INDEX recent_t ON recent (t)",
        "CREATE TABLE raw_block (gpu INTEGER NOT NULL, minute INTEGER NOT NULL, data BLOB NOT NULL, "
        "PRIMARY KEY (gpu, minute))",
        "CREATE TABLE rollup_block (gpu INTEGER NOT NULL, minute INTEGER NOT NULL, data BLOB NOT NULL, "
        "PRIMARY KEY (gpu, minute))",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)
# Stored precision: history is for trends, and rounding is what keeps a GPU-day small.
_DECIMALS = {"energy_j": 0, "memory_used_mib": 0, "memory_total_mib": 0, "process_memory_mib": 0}


class StoreError(RuntimeError):
    """The database cannot be written or read; the message says why and what to do."""


@dataclass(frozen=True)
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


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the missing migrations in one transaction each; return the schema version."""
    conn.execute(MIGRATIONS[1][0])
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(f"history schema {version} is newer than this gpuhealth ({SCHEMA_VERSION}); upgrade it")
    for target in range(version + 1, SCHEMA_VERSION + 1):
        with conn:
            for statement in MIGRATIONS[target][1 if target == 1 else 0:]:
                conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(target),))
    return SCHEMA_VERSION


def _pack(data: Any) -> bytes:
    return zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 6)


def _unpack(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob))


def _round(metric: str, value: Any) -> float | int | None:
    if value is None:
        return None
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
        self._minute: int | None = None  # the minute the last write was in
        self._retained_at = -math.inf
        try:
            if str(path) != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit (`with self._conn`) and short.
            self._conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a process crash loses nothing committed
            self._conn.isolation_level = ""  # `with conn` now opens and commits a transaction
            migrate(self._conn)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(explain(exc, path) if isinstance(exc, sqlite3.Error) else f"{path}: {exc}") from exc

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
        """Compact every complete minute in ``recent``; apply retention (at most once a minute)."""
        now = self.clock() if now is None else now
        cutoff = (now // 60) * 60
        try:
            with self._conn:
                rows = self._conn.execute("SELECT t, gpu, data FROM recent WHERE t < ? ORDER BY t", (cutoff,))
                self._compact(rows.fetchall())
                self._conn.execute("DELETE FROM recent WHERE t < ?", (cutoff,))
            if now - self._retained_at >= 60:
                self._retained_at = now
                with self._conn:
                    self._conn.execute("DELETE FROM raw_block WHERE minute < ?", ((now - self.raw_keep_s) // 60,))
                    self._conn.execute("DELETE FROM rollup_block WHERE minute < ?",
                                       ((now - self.rollup_keep_s) // 60,))
                    self._conn.execute("DELETE FROM recent WHERE t < ?", (now - self.raw_keep_s,))
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def flush(self) -> None:
        """Compact everything, the minute in progress too (on SIGTERM): a restart in the same minute merges."""
        try:
            with self._conn:
                self._compact(self._conn.execute("SELECT t, gpu, data FROM recent ORDER BY t").fetchall())
                self._conn.execute("DELETE FROM recent")
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def _compact(self, rows: Iterable[tuple[float, int, str]]) -> None:
        groups: dict[tuple[int, int], list[tuple[float, dict[str, Any]]]] = defaultdict(list)
        for t, gpu, data in rows:
            groups[(gpu, int(t // 60))].append((t, json.loads(data)))
        for (gpu, minute), items in groups.items():
            old = self._conn.execute("SELECT data FROM raw_block WHERE gpu = ? AND minute = ?",
                                     (gpu, minute)).fetchone()
            if old is not None:  # a restart inside a minute that was compacted already: merge
                items = sorted(_block_items(minute, _unpack(old[0])) + items, key=lambda item: item[0])
            self._conn.execute("INSERT OR REPLACE INTO raw_block VALUES (?, ?, ?)",
                               (gpu, minute, _pack(_block(minute, items))))
            self._conn.execute("INSERT OR REPLACE INTO rollup_block VALUES (?, ?, ?)",
                               (gpu, minute, _pack(_rollup(items))))

    # ---- reading

    def gpus(self) -> list[int]:
        rows = self._conn.execute("SELECT DISTINCT gpu FROM rollup_block UNION SELECT DISTINCT gpu FROM recent")
        return sorted(row[0] for row in rows)

    def series(self, gpu: int, metric: str, since: float, until: float | None = None) -> Series:
        """Raw points when the range is short and still within raw retention, else per-minute rollups."""
        until = self.clock() if until is None else until
        raw = until - since <= self.raw_query_max_s and since >= self.clock() - self.raw_keep_s
        try:
            items = self._raw_items(gpu, since, until)
            if raw:
                points = [(t, v, v, v) for t, values in items if (v := values.get(metric)) is not None]
                return Series(gpu, metric, "raw", tuple(points))
            return Series(gpu, metric, "minute", tuple(self._minutes(gpu, metric, since, until)))
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from exc

    def _raw_items(self, gpu: int, since: float, until: float) -> list[tuple[float, dict[str, Any]]]:
        items: list[tuple[float, dict[str, Any]]] = []
        for minute, data in self._conn.execute(
                "SELECT minute, data FROM raw_block WHERE gpu = ? AND minute BETWEEN ? AND ? ORDER BY minute",
                (gpu, since // 60, until // 60)):
            items.extend(_block_items(minute, _unpack(data)))
        for t, data in self._conn.execute("SELECT t, data FROM recent WHERE gpu = ? AND t BETWEEN ? AND ? "
                                          "ORDER BY t", (gpu, since, until)):
            items.append((t, json.loads(data)))
        return [(t, v) for t, v in items if since <= t <= until]

    def _minutes(self, gpu: int, metric: str, since: float, until: float) -> list[tuple[float, float, float, float]]:
        out = []
        for minute, data in self._conn.execute(
                "SELECT minute, data FROM rollup_block WHERE gpu = ? AND minute BETWEEN ? AND ? ORDER BY minute",
                (gpu, since // 60, until // 60)):
            stats = _unpack(data).get(metric)
            if stats:
                out.append((minute * 60.0, stats[1], stats[2], stats[3]))
        # the minute still being written lives in `recent`: roll it up on the fly
        current = self._conn.execute("SELECT t, data FROM recent WHERE gpu = ? AND t BETWEEN ? AND ? ORDER BY t",
                                     (gpu, since, until)).fetchall()
        by_minute: dict[int, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
        for t, data in current:
            by_minute[int(t // 60)].append((t, json.loads(data)))
        for minute, items in sorted(by_minute.items()):
            stats = _rollup(items).get(metric)
            if stats:
                out.append((minute * 60.0, stats[1], stats[2], stats[3]))
        return out

    def integrity(self) -> str:
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        try:
            self._conn.close()
        except sqlite3.Error:
            pass


def _deltas(values: list[int | None]) -> list[int | None]:
    """Differences from the previous known value: slow-moving and counting readings become small numbers
    that zlib packs tightly (energy, a counter in the millions, costs a few bits per sample)."""
    out: list[int | None] = []
    last = 0
    for value in values:
        out.append(None if value is None else value - last)
        last = last if value is None else value
    return out


def _undeltas(deltas: list[int | None]) -> list[int | None]:
    out: list[int | None] = []
    last = 0
    for delta in deltas:
        if delta is not None:
            last += delta
        out.append(None if delta is None else last)
    return out


def _scale(name: str) -> int:
    return 10 ** _DECIMALS.get(name, 1)


def _block(minute: int, items: list[tuple[float, dict[str, Any]]]) -> dict[str, list[Any]]:
    """Columns of delta-encoded integers: milliseconds from the minute's start, then each metric scaled
    to its stored precision (None = not read)."""
    start = minute * 60.0
    names = sorted({name for _, values in items for name in values})
    block: dict[str, list[Any]] = {"t": _deltas([round((t - start) * 1000) for t, _ in items])}
    for name in names:
        factor = _scale(name)
        block[name] = _deltas([None if (v := values.get(name)) is None else round(v * factor) for _, values in items])
    return block


def _block_items(minute: int, block: dict[str, list[Any]]) -> list[tuple[float, dict[str, Any]]]:
    start = minute * 60.0
    columns = {name: [None if v is None else _number(v / _scale(name)) for v in _undeltas(deltas)]
               for name, deltas in block.items() if name != "t"}
    return [(start + offset / 1000, {n: column[i] for n, column in columns.items() if column[i] is not None})
            for i, offset in enumerate(_undeltas(block["t"]))]


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value


def _rollup(items: list[tuple[float, dict[str, Any]]]) -> dict[str, list[float]]:
    """metric -> [n, min, avg, max] over one minute's samples."""
    columns: dict[str, list[float]] = defaultdict(list)
    for _, values in items:
        for name, value in values.items():
            columns[name].append(float(value))
    return {name: [len(v), min(v), round(sum(v) / len(v), 2), max(v)] for name, v in columns.items()}
