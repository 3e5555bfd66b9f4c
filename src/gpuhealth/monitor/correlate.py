"""Correlation rules as data: knowledge/correlations.csv, evaluated over the monitor's recent events.

A row says what to count (an Xid code, the catalogue's fatal Xids, or a counter's rises), which part of an Xid's
kernel line must match (a bit of Xid 74's registers, NVLink5's Fatal/Nonfatal, Xid 154's recovery action), how
to group (one GPU, one NVLink of one GPU, different GPUs, the node), how many within which window, and what that
means (action, impact, severity). Each row names its source. A ``shadow`` row (or every row, with `[monitor]
correlation_shadow = true`) is evaluated and recorded in the history, never notified: a rule can be watched on
a fleet before it pages anyone.

``evaluate`` is pure: rows and occurrences in, hits out. ``Correlator`` keeps the occurrences of the last day
(bounded), turns the monitor's events into them, runs ``evaluate`` at most every ``every_s`` of event time,
records each new hit and hands the alerts of the rows that are not shadow to the notifiers.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

from .config import parse_duration
from .rules import SEVERITIES, Alert, Basis, took
from .sample import Event, Sample, XidEvent

TABLE = "correlations.csv"
KINDS = ("burst", "spread", "decode", "rate")
SCOPES = ("same_gpu", "same_link", "different_gpus", "node", "same_port")
# The counters a rate row may name: a counter's rises, and the starts of a hardware slowdown.
COUNTERS = ("ecc_volatile_corrected", "pcie_replay_count")
SLOWDOWN = "slowdown_events"
# An InfiniBand/RoCE port's error counters (counters/ of /sys/class/infiniband/<device>/ports/<n>, read by
# monitor/ports.py once a minute): a rate row of one of these counts per port (scope same_port), and only those do.
PORT_COUNTERS = {"link_downed": "InfiniBand link downs (flaps)", "symbol_error": "InfiniBand symbol errors",
                 "port_rcv_errors": "InfiniBand receive errors",
                 "link_error_recovery": "InfiniBand link error recoveries"}
# NVML clock event reasons that are hardware slowdowns (gpuhealth.nvml.CLOCK_EVENT_BITS): hw_slowdown,
# hw_thermal_slowdown, hw_power_brake_slowdown, the ones GPUd's hw-slowdown component counts.
SLOWDOWN_MASK = 0x8 | 0x40 | 0x80
MAX_OCCURRENCES = 20_000  # an Xid storm must not grow the monitor's memory without bound
# Of an Xid's kernel text an occurrence keeps only the part ``decode`` reads (at most this many characters; the
# documented forms are under 100): a record may be 8 KiB, and 20,000 whole lines held for a day were 80-160 MiB.
MAX_DECODED = 256
# Identical Xids (the same GPU, code and decoded text) this close after the first are one occurrence that counts
# them all (``amount``): a storm of thousands a second is one occurrence a second per GPU and Xid, not thousands.
# A burst row (bursts of at least 15 s) counts the burst once either way; a count row counts each Xid.
COALESCE_S = 1.0
COALESCE_LOOKBACK = 64  # occurrences looked back through for the one to add to (the newest: time order)
DETAILS = ("reg0", "reg1", "reg2", "reg3", "reg4", "reg5", "reg6", "nvl5", "recovery")

# Xid 74: "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)" (NVIDIA, "Xid
# Errors", XID 74: the seven registers, the first one's bits documented).
_XID74 = lazy_re(r"\blink\s+(\d+)\s*\(\s*(0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+){0,6})\s*\)", re.I)
# NVLink5 (Xid 144-150): "<subcomponent> <Fatal|Nonfatal> <XC0|XC1> <iN> Link <n> (<intrInfo> <errorStatus> ...)"
_NVL5 = lazy_re(r"\b(Fatal|Nonfatal)\b.*?\bLink\s+(\d+)\b")
# Xid 154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)" (the driver's gpu.c)
_RECOVERY = lazy_re(r"recovery action changed from\s+0x[0-9a-fA-F]+\s*\(([^)]*)\)\s*to\s+0x[0-9a-fA-F]+\s*\(([^)]*)\)",
                    re.I)
_MATCH = lazy_re(r"xid:\d+(-\d+)?")


@dataclass(frozen=True)
class Row:
    id: str
    kind: str
    match: str  # "xid:31", "xid:144-150", "class:fatal", "metric:<counter>"
    detail: str  # "", "reg0:4 5", "nvl5:Fatal", "recovery:Node Reboot Required"
    scope: str
    count: float
    window: float
    burst: float  # occurrences this close to the first of their burst count once
    action: str
    impact: str
    severity: str
    shadow: bool
    why: str
    source: str

    def xids(self) -> tuple[int, int] | None:
        """The Xid codes (low, high) an ``xid:`` row counts; None for other rows."""
        if not self.match.startswith("xid:"):
            return None
        low, _, high = self.match.removeprefix("xid:").partition("-")
        return int(low), int(high or low)

    def detail_match(self, fields: dict[str, Any]) -> bool:
        if not self.detail:
            return True
        name, _, want = self.detail.partition(":")
        have = fields.get(name)
        if have is None:
            return False
        if name.startswith("reg"):
            return any(have >> int(bit) & 1 for bit in want.split())
        return str(have).casefold() == want.casefold()

    def describe(self) -> str:
        """What the row counts, in words: "Xid 31", "a fatal Xid", "corrected ECC errors"."""
        if self.match == "class:fatal":
            what = "a fatal Xid"
        elif self.match.startswith("xid:"):
            what = f"Xid {self.match.removeprefix('xid:')}"
        else:
            what = {"ecc_volatile_corrected": "corrected ECC errors", "pcie_replay_count": "PCIe replays",
                    SLOWDOWN: "hardware slowdowns", **PORT_COUNTERS}[self.match.removeprefix("metric:")]
        if self.detail:
            name, _, want = self.detail.partition(":")
            what += {"nvl5": f" marked {want}", "recovery": f" asking for {want!r}"}.get(
                name, f" with {name.upper()} bit {' or '.join(want.split())}")
        return what


def _row(raw: dict[str, str]) -> Row:
    from gpuhealth.model import ACTIONS, IMPACTS

    ident = raw.get("id") or "?"

    def bad(why: str) -> ValueError:
        return ValueError(f"{TABLE}: {ident}: {why}")

    if None in raw or any(value is None for value in raw.values()):
        raise bad("a row has as many cells as the header")
    checks = [(raw["kind"] in KINDS, f"kind must be one of {', '.join(KINDS)}"),
              (raw["scope"] in SCOPES, f"scope must be one of {', '.join(SCOPES)}"),
              (raw["action"] in ACTIONS, f"action must be one of {', '.join(ACTIONS)}"),
              (raw["impact"] in IMPACTS, f"impact must be one of {', '.join(IMPACTS)}"),
              (raw["severity"] in SEVERITIES, f"severity must be one of {', '.join(SEVERITIES)}"),
              (raw["shadow"] in ("yes", "no"), "shadow must be yes or no"),
              (bool(raw["why"].strip()), "a row says why"),
              ("<http" in raw["source"], "a row names its source: a title and <address>")]
    for ok, why in checks:
        if not ok:
            raise bad(why)
    match, detail = raw["match"], raw["detail"]
    metrics = (*COUNTERS, SLOWDOWN, *PORT_COUNTERS)
    if not (_MATCH.fullmatch(match) or match == "class:fatal"
            or match.removeprefix("metric:") in metrics and match.startswith("metric:")):
        raise bad(f"match {match!r}: xid:N, xid:N-M, class:fatal or metric:{'|'.join(metrics)}")
    if (match.removeprefix("metric:") in PORT_COUNTERS) != (raw["scope"] == "same_port"):
        raise bad("a port counter is counted per port (scope same_port), and only a port counter is")
    if detail and (detail.partition(":")[0] not in DETAILS or not detail.partition(":")[2].strip()):
        raise bad(f"detail {detail!r}: one of {', '.join(DETAILS)}, a colon and what it must be")
    if detail.startswith("reg") and not all(b.isdecimal() and int(b) < 32 for b in detail.partition(":")[2].split()):
        raise bad(f"detail {detail!r}: register bits are numbers 0-31 separated by spaces")
    if (raw["kind"] == "rate") != match.startswith("metric:"):
        raise bad("a rate row counts a metric: and only a rate row does")
    try:
        count, window = float(raw["count"]), parse_duration(raw["window"])
        burst = parse_duration(raw["burst"]) if raw["burst"] else 0.0
    except ValueError as exc:
        raise bad(str(exc)) from None
    if not (count >= 1 and window > 0):
        raise bad("count must be >= 1 and window longer than 0")
    return Row(raw["id"], raw["kind"], match, detail, raw["scope"], count, window, burst, raw["action"],
               raw["impact"], raw["severity"], raw["shadow"] == "yes", raw["why"], raw["source"])


def load_rows(raw_rows: Iterable[dict[str, str]] | None = None) -> tuple[Row, ...]:
    """The table's rows, each checked; ValueError names the table, the row and what is wrong."""
    if raw_rows is None:
        from gpuhealth.knowledge import table_rows

        raw_rows = table_rows(TABLE)
    rows = tuple(_row(raw) for raw in raw_rows)
    ids = [row.id for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{TABLE}: ids must be unique")
    return rows


# ---------------------------------------------------------------------- what happened, and what it means


@record
class Occurrence:
    """One thing a row may count: an Xid (``what`` "xid", with its kernel text when the source has it), or a
    counter's rise by ``amount`` (``what`` the counter), or the start of a hardware slowdown."""

    t: float
    gpu: int
    what: str
    xid: int = 0
    amount: float = 1.0  # a counter's rise; for an Xid, how many identical Xids it stands for (Correlator._xid)
    text: str = ""  # the part of an Xid's kernel text that ``decode`` reads; a port counter's port ("mlx5_0/1")


def decode(xid: int, text: str) -> dict[str, Any]:
    """The documented fields of an Xid's kernel text: Xid 74's registers ``reg0``... and ``link``; NVLink5's
    (144-150) ``nvl5`` (Fatal/Nonfatal) and ``link``; Xid 154's new ``recovery`` action. {} for none."""
    if not text:
        return {}
    if xid == 74 and (m := _XID74.search(text)):
        registers = [int(value, 16) for value in m[2].split(",")]
        return {"link": int(m[1]), **{f"reg{i}": value for i, value in enumerate(registers)}}
    if 144 <= xid <= 150 and (m := _NVL5.search(text)):
        return {"nvl5": m[1], "link": int(m[2])}
    if xid == 154 and (m := _RECOVERY.search(text)):
        return {"recovery": m[2].strip()}
    return {}


def decodable(xid: int, text: str) -> str:
    """The part of an Xid's kernel text that ``decode`` reads (it decodes the same from it), "" when it reads
    none: what the correlator keeps, so that an occurrence's size does not follow the line's."""
    if not text:
        return ""
    pattern = _XID74 if xid == 74 else _NVL5 if 144 <= xid <= 150 else _RECOVERY if xid == 154 else None
    match = pattern.search(text) if pattern is not None else None
    return match[0] if match is not None and len(match[0]) <= MAX_DECODED else ""


def _fatal(xid: int) -> bool:
    from gpuhealth.knowledge.xid import lookup

    info = lookup(xid)
    return info is not None and info.severity.value == "critical"


def _matches(row: Row, occurrence: Occurrence) -> dict[str, Any] | None:
    """The occurrence's decoded fields when ``row`` counts it, else None."""
    if row.match.startswith("metric:"):
        return {} if occurrence.what == row.match.removeprefix("metric:") else None
    if occurrence.what != "xid":
        return None
    span = row.xids()
    if span is not None and not span[0] <= occurrence.xid <= span[1]:
        return None
    if span is None and not _fatal(occurrence.xid):
        return None
    fields = decode(occurrence.xid, occurrence.text)
    return fields if row.detail_match(fields) else None


@record
class Hit:
    row: Row
    gpu: int | None  # None: different GPUs, or the node
    key: str  # the row's id, with "/link N" for a same_link row
    score: float  # how many (bursts, GPUs, or the counter's rise)
    gpus: tuple[int, ...]


def _score(items: list[Occurrence], burst: float) -> float:
    """The amounts, a burst counting once: an occurrence within ``burst`` of its burst's first is the same burst."""
    total, start = 0.0, None
    for item in sorted(items, key=lambda o: o.t):
        if burst and start is not None and item.t - start <= burst:
            continue
        start = item.t
        # an Xid's amount is how many identical Xids it stands for (Correlator._xid): its burst counts once
        total += 1.0 if burst and item.what == "xid" else item.amount
    return total


def evaluate(rows: Sequence[Row], occurrences: Iterable[Occurrence], now: float) -> list[Hit]:
    """Every row that holds at ``now`` over the occurrences inside its window (pure)."""
    occurrences = list(occurrences)
    hits: list[Hit] = []
    for row in rows:
        groups: dict[tuple[int | None, int | str | None], list[Occurrence]] = {}
        for occurrence in occurrences:
            if not now - row.window < occurrence.t <= now:
                continue
            fields = _matches(row, occurrence)
            if fields is None:
                continue
            if row.scope == "same_link":
                if "link" not in fields:
                    continue
                group: tuple[int | None, int | str | None] = (occurrence.gpu, fields["link"])
            elif row.scope == "same_port":
                group = (None, occurrence.text)
            else:
                group = (occurrence.gpu, None) if row.scope == "same_gpu" else (None, None)
            groups.setdefault(group, []).append(occurrence)
        for (gpu, link), items in groups.items():
            gpus = () if row.scope == "same_port" else tuple(sorted({o.gpu for o in items}))
            score = float(len(gpus)) if row.scope == "different_gpus" else _score(items, row.burst)
            if score >= row.count:
                key = row.id if link is None else f"{row.id}/{'' if row.scope == 'same_port' else 'link'}{link}"
                hits.append(Hit(row, gpu, key, score, gpus))
    return hits


def message(hit: Hit) -> str:
    row = hit.row
    if row.scope == "different_gpus":
        where = f"GPUs {', '.join(map(str, hit.gpus))}"
    elif row.scope == "node":
        where = "the node"
    elif row.scope == "same_port":
        where = f"port {hit.key.partition('/')[2]}"
    else:
        where = f"GPU {hit.gpu}" + (f" NVLink {hit.key.rpartition('/link')[2]}" if "/link" in hit.key else "")
    if row.scope == "different_gpus":
        amount = f"on {len(hit.gpus)} GPUs"
    elif row.kind == "rate":
        amount = f"up {hit.score:g}"
    else:
        amount = f"{hit.score:g} time(s)" + (f" (a burst within {took(row.burst)} counts once)" if row.burst else "")
    return f"{where}: {row.describe()} {amount} within {took(row.window)} [{row.id}]: {row.why}"


# ---------------------------------------------------------------------- in the monitor


class Correlator:
    """The table run from the monitor's loop. ``feed`` every batch of events; ``step`` evaluates when ``every_s``
    of event time has passed since the last evaluation and returns the alerts to notify."""

    def __init__(self, rows: Sequence[Row], every_s: float = 10.0, shadow_all: bool = False, store: Any = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.rows = tuple(rows)
        self.every_s = every_s
        self.shadow_all = shadow_all
        self.store = store
        self._log = log
        self._keep_s = max((row.window for row in self.rows), default=0.0)
        self._occurrences: deque[Occurrence] = deque(maxlen=MAX_OCCURRENCES)
        self._last: dict[tuple[int, str], float] = {}  # (GPU, counter) -> its last value
        self._slowed: dict[int, bool] = {}
        self._port_last: dict[tuple[str, str], int] = {}  # (port, counter) -> its last value
        self._latest = 0.0
        self._evaluated_at: float | None = None
        self._open: dict[tuple[int | None, str], Alert] = {}  # firing, notified
        self._seen: set[tuple[int | None, str]] = set()  # holding at the last evaluation (shadow ones too)
        self.recorded = 0

    def shadow(self, row: Row) -> bool:
        return self.shadow_all or row.shadow

    def feed(self, events: Iterable[Event]) -> None:
        for event in events:
            self._latest = max(self._latest, event.t)
            if isinstance(event, XidEvent):
                self._xid(event.t, event.gpu, event.xid, decodable(event.xid, event.text or ""))
            elif isinstance(event, Sample):
                self._sample(event)

    def _xid(self, t: float, gpu: int, xid: int, text: str) -> None:
        """An Xid occurrence, or one more Xid on its identical twin of the last ``COALESCE_S`` seconds."""
        occurrences = self._occurrences
        for back in range(1, min(len(occurrences), COALESCE_LOOKBACK) + 1):
            last = occurrences[-back]
            if last.t < t - COALESCE_S:
                break
            if last.what == "xid" and last.xid == xid and last.gpu == gpu and last.text == text and last.t <= t:
                occurrences[-back] = Occurrence(last.t, gpu, "xid", xid, last.amount + 1.0, text)
                return
        occurrences.append(Occurrence(t, gpu, "xid", xid, 1.0, text))

    def feed_log(self, xids: Iterable[tuple[float, int, int, str]], tolerance: float = 5.0) -> int:
        """Xid occurrences read from the full check's kernel log (monitor/xidlog.py): (t, GPU, Xid, text). One that
        NVML or the kernel-log follower already delivered (the same GPU and Xid within ``tolerance`` seconds) is not
        counted twice; a delivered one without its text takes the line's. Returns how many were added."""
        delivered: dict[tuple[int, int], list[int]] = {}
        occurrences = self._occurrences
        for index, occurrence in enumerate(occurrences):
            if occurrence.what == "xid":
                delivered.setdefault((occurrence.gpu, occurrence.xid), []).append(index)
        new = []
        for t, gpu, xid, line_text in xids:
            text = decodable(xid, line_text)
            twin = next((i for i in delivered.get((gpu, xid), ()) if abs(occurrences[i].t - t) <= tolerance), None)
            if twin is not None:
                if text and not occurrences[twin].text:
                    occurrences[twin] = dataclasses.replace(occurrences[twin], text=text)
                continue
            new.append(Occurrence(t, gpu, "xid", xid, 1.0, text))
        if new:  # in time order, as ``step`` drops the oldest from the left; the newest kept when over the bound
            self._occurrences = deque(sorted([*occurrences, *new], key=lambda o: o.t), maxlen=MAX_OCCURRENCES)
        return len(new)

    def _sample(self, sample: Sample) -> None:
        for counter in COUNTERS:
            value = getattr(sample, counter)
            if value is None:
                continue
            before = self._last.get((sample.gpu, counter))
            self._last[(sample.gpu, counter)] = value
            if before is not None and value > before:  # a fall is a reset of the counter (driver reload)
                self._occurrences.append(Occurrence(sample.t, sample.gpu, counter, amount=float(value - before)))
        if sample.clock_event_reasons is not None:
            slowed = bool(sample.clock_event_reasons & SLOWDOWN_MASK)
            if slowed and not self._slowed.get(sample.gpu, False):
                self._occurrences.append(Occurrence(sample.t, sample.gpu, SLOWDOWN))
            self._slowed[sample.gpu] = slowed

    def feed_ports(self, t: float, ports: Iterable[tuple[str, dict[str, int]]]) -> None:
        """One read of the InfiniBand/RoCE ports (monitor/ports.py): (port, {counter: value}); a counter's rise
        since the port's last read is an occurrence. The first read of a port is its baseline: the counters count
        since the driver loaded, which is `check`'s (GH721), not a rise."""
        self._latest = max(self._latest, t)
        for port, counters in ports:
            for counter, value in counters.items():
                if counter not in PORT_COUNTERS:
                    continue
                before = self._port_last.get((port, counter))
                self._port_last[(port, counter)] = value
                if before is not None and value > before:  # a fall: the counters were reset (perfquery -R)
                    self._occurrences.append(Occurrence(t, -1, counter, amount=float(value - before), text=port))

    def reboot(self) -> None:
        """The host rebooted: counters start again from 0 (their baselines go); what happened stays counted, as
        a fault that outlives a reboot is what several of the rows are about."""
        self._last.clear()
        self._slowed.clear()
        self._port_last.clear()

    def step(self, now: float | None = None) -> list[Alert]:
        now = self._latest if now is None else now
        if not self.rows or (self._evaluated_at is not None and now - self._evaluated_at < self.every_s):
            return []
        self._evaluated_at = now
        while self._occurrences and self._occurrences[0].t <= now - self._keep_s:
            self._occurrences.popleft()
        hits = {(hit.gpu, hit.key): hit for hit in evaluate(self.rows, self._occurrences, now)}
        alerts: list[Alert] = []
        for identity, hit in hits.items():
            if identity in self._seen:
                continue
            text = message(hit)
            self._record(hit, text, now)
            if not self.shadow(hit.row):
                alert = Alert("correlate", hit.gpu, hit.row.severity, "firing", text, now, hit.key,
                              about=tuple(Basis(gpu) for gpu in hit.gpus), action=hit.row.action,
                              impact=hit.row.impact)
                self._open[identity] = alert
                alerts.append(alert)
        for identity in [i for i in self._open if i not in hits]:
            alert = self._open.pop(identity)
            alerts.append(Alert("correlate", alert.gpu, alert.severity, "resolved",
                                f"{alert.key}: no longer holds over its window, after {took(now - alert.t)}", now,
                                alert.key, action=alert.action, impact=alert.impact))
        self._seen = set(hits)
        return alerts

    def _record(self, hit: Hit, text: str, now: float) -> None:
        """Every new hit goes into the history, shadow or not: what a shadow rule would have said is read there."""
        self.recorded += 1
        if self.store is None:
            return
        from .store import StoreError

        try:
            self.store.note_correlation(now, hit.key, hit.gpu, self.shadow(hit.row), hit.row.action, text)
        except StoreError as exc:
            if self._log is not None:
                self._log(str(exc))


def from_config(options: dict[str, Any], store: Any = None, log: Callable[[str], None] | None = None) -> Correlator:
    """The correlator of `[monitor] correlate_every` (0: off, no rows) and `correlation_shadow`."""
    every = parse_duration(options.get("correlate_every", "10s"))
    shadow = options.get("correlation_shadow", False)
    if not isinstance(shadow, bool):
        raise ValueError(f"monitor.correlation_shadow must be true or false, not {shadow!r}")
    return Correlator(load_rows() if every > 0 else (), every, shadow, store, log)


# ---------------------------------------------------------------------- docs/correlations.md


def markdown(rows: Sequence[Row]) -> str:
    from gpuhealth.inert import one_line

    def cell(text: str) -> str:
        return one_line(text).replace("|", "\\|")

    lines = ["# Correlation rules", "",
             "Generated from `src/gpuhealth/knowledge/correlations.csv` by `make docs`; do not edit by hand.", "",
             "The monitor evaluates these rules over the events of the last day (`[monitor] correlate_every`, "
             "10 s of event time by default). A rule that holds becomes an alert named `correlate` keyed by the "
             "rule's id, with the rule's action and impact, through the same notifiers, folding and once-per-boot "
             "paging as every other alert. A **shadow** rule, or every rule with `[monitor] correlation_shadow = "
             "true`, is recorded in the history's `correlation` table and never notified.", "",
             "Scopes: `same_gpu` counts per GPU; `same_link` per NVLink of one GPU (from the Xid's kernel line); "
             "`different_gpus` counts the GPUs it happened on; `node` counts everything; `same_port` counts per "
             "InfiniBand/RoCE port (its counters read once a minute on a live host). A `burst` collapses "
             "occurrences that close to the first of their burst into one. Decoded fields (Xid 74's registers, "
             "NVLink5's Fatal/Nonfatal and link, Xid 154's recovery action) come from the Xid's kernel text, "
             "which the monitor's kernel log follower (`[monitor] kernel_log`, reading /dev/kmsg as root) and a "
             "replayed trace give; NVML's Xid events alone carry only the code, so the decode rows match only "
             "where the text is known.", "",
             f"{len(rows)} rules.", "",
             "| id | kind | counts | scope | at least | within | burst | action | impact | severity | shadow |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| `{row.id}` | {row.kind} | {cell(row.describe())} | {row.scope} | {row.count:g} | "
                     f"{took(row.window)} | {took(row.burst) if row.burst else '-'} | {row.action} | {row.impact} | "
                     f"{row.severity} | {'yes' if row.shadow else 'no'} |")
    lines.append("")
    for row in rows:
        lines += [f"## {row.id}", "", cell(row.why), "", f"Source: {cell(row.source)}", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import sys
    from pathlib import Path

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m gpuhealth.monitor.correlate docs/correlations.md", file=sys.stderr)
        return 2
    Path(args[0]).write_text(markdown(load_rows()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
