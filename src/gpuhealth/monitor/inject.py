"""`gpuhealth inject`: a known fault written into a copy of a replay trace, for drills.

An operator tests the alert routing end to end (stderr, log file, webhook, Alertmanager) without a broken GPU:
``gpuhealth inject xid 79 --gpu 3 --into examples/h100x8.trace -o drill.trace`` then
``gpuhealth monitor --source replay:drill.trace`` pages. Every record the injection writes or changes carries
``"injected": true`` and the header says ``"drill": true``; the monitor marks each alert on an injected GPU
"DRILL", keeps injected samples out of the history and drill alerts out of the fault memory (boots.py), so a
drill never reads as a real fault. The trace given is only read; the copy is written with safefile.

Traces only: the monitor has no kernel-log line source to feed a fake line into (its Xids come from NVML or a
trace; the full check reads the real kernel log, which a drill must not touch).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from gpuhealth.exits import CannotRun

from .config import parse_duration, show_seconds

# What each kind does to the GPU's records from --at on, the rule it must fire, and the rule option that says how
# long the fault must hold before that rule fires (None: at once).
KINDS: dict[str, tuple[str, str | None]] = {
    "xid": ("xid", None),
    "temperature": ("temperature", "for"),
    "ecc": ("ecc", None),
    "gpu-lost": ("gpu_lost", None),
    "stuck-sensor": ("stuck_sensor", "for"),
    "util-collapse": ("utilization_collapse", "for"),
}
DEFAULT_AT_S = 30.0  # into the trace: the rules have seen the GPU healthy first (the ECC rule needs a baseline)
LOST_REASON = "GPU is lost"  # NVML's wording, as the NVML source reports it


class InjectError(ValueError):
    """The drill cannot be written: the message names the file or option and why."""


@dataclass(frozen=True)
class Drill:
    kind: str
    gpu: int
    at_s: float = DEFAULT_AT_S  # seconds after the trace's first record
    xid: int | None = None

    def describe(self) -> str:
        what = f"xid {self.xid}" if self.kind == "xid" else self.kind
        return f"DRILL: {what} injected on GPU {self.gpu} at +{show_seconds(self.at_s)} by `gpuhealth inject`"


def inject(text: str, drill: Drill, rules: dict[str, dict[str, Any]], where: str = "trace") -> str:
    """The trace ``text`` with ``drill`` written in; ``rules`` is the monitor's [rules] configuration (the
    thresholds and durations the fault must meet). InjectError when the trace cannot carry it."""
    header, records = _parse(text, where)
    times = [r["t"] for r in records if _timed(r)]
    if not times:
        raise InjectError(f"{where}: the trace has no records")
    at = min(times) + drill.at_s
    mine = [r for r in records if r.get("kind") == "sample" and r.get("gpu") == drill.gpu and _timed(r)]
    if not mine:
        raise InjectError(f"{where}: no samples of GPU {drill.gpu} (GPUs in it: {_gpus(records)})")
    after = [r for r in mine if r["t"] >= at]
    if not after:
        raise InjectError(f"{where}: GPU {drill.gpu} has no sample at or after +{show_seconds(drill.at_s)}: "
                          "choose an earlier --at")
    rule, hold_key = KINDS[drill.kind]
    options = rules.get(rule, {})
    if options.get("enabled") is False:
        raise InjectError(f"the {rule} rule is disabled in the configuration: the drill would page nothing")
    if hold_key is not None:
        _check_hold(drill, rule, after, at, parse_duration(options.get(hold_key, 0)), where)
    _WRITERS[drill.kind](records, after, mine, at, drill, options, where)
    header = {**header, "drill": True,
              "note": f"{header.get('note', '')} {drill.describe()}.".strip()}
    lines = [json.dumps(header, ensure_ascii=False)]  # the header as TraceWriter writes it, the records compact
    lines += [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    return "\n".join(lines) + "\n"


def _parse(text: str, where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from .sources import TRACE_FORMAT, TRACE_VERSION  # here: `gpuhealth --help` imports this module for its line

    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError as exc:
        raise InjectError(f"{where}: not a gpuhealth trace ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != TRACE_FORMAT:
        raise InjectError(f"{where}: not a gpuhealth trace (the first line is no {TRACE_FORMAT} header)")
    if header.get("version") != TRACE_VERSION:
        raise InjectError(f"{where}: trace version {header.get('version')!r}; this gpuhealth reads {TRACE_VERSION}")
    records = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InjectError(f"{where}:{number}: {exc}") from exc
        if not isinstance(record, dict):
            raise InjectError(f"{where}:{number}: a record is a JSON object")
        records.append(record)
    return header, records


def _timed(record: dict[str, Any]) -> bool:
    t = record.get("t")
    return isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)


def _gpus(records: list[dict[str, Any]]) -> str:
    return ", ".join(str(g) for g in sorted({r.get("gpu") for r in records if isinstance(r.get("gpu"), int)}))


def _check_hold(drill: Drill, rule: str, after: list[dict[str, Any]], at: float, hold_s: float, where: str) -> None:
    covered = after[-1]["t"] - at
    if covered < hold_s:
        raise InjectError(f"{where}: the {rule} rule fires after the fault holds {show_seconds(hold_s)}, but the "
                          f"trace has only {show_seconds(covered)} of GPU {drill.gpu} after --at "
                          f"{show_seconds(drill.at_s)}: choose an earlier --at or a longer trace")


def _mark(record: dict[str, Any], **changes: Any) -> None:
    record.update(changes, injected=True)


Writer = Callable[[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], float, Drill, dict[str, Any], str],
                  None]


def _xid(records: list[dict[str, Any]], after: list[dict[str, Any]], mine: list[dict[str, Any]], at: float,
         drill: Drill, options: dict[str, Any], where: str) -> None:
    event = {"kind": "xid", "t": after[0]["t"], "gpu": drill.gpu, "xid": drill.xid, "injected": True}
    records.insert(_position(records, after[0]), event)  # just before the sample it stands beside


def _position(records: list[dict[str, Any]], record: dict[str, Any]) -> int:
    """Where ``record`` itself stands (not a record equal to it: a trace may repeat a line)."""
    return next(i for i, r in enumerate(records) if r is record)


def _temperature(records: list[dict[str, Any]], after: list[dict[str, Any]], mine: list[dict[str, Any]], at: float,
                 drill: Drill, options: dict[str, Any], where: str) -> None:
    hot = float(options.get("threshold_c", 85)) + 3  # over the alert threshold, whatever the slowdown margin says
    for record in after:
        _mark(record, temperature_c=hot)


def _ecc(records: list[dict[str, Any]], after: list[dict[str, Any]], mine: list[dict[str, Any]], at: float,
         drill: Drill, options: dict[str, Any], where: str) -> None:
    for record in after:  # one uncorrected error from --at on: the counter is cumulative since boot
        _mark(record, ecc_volatile_uncorrected=int(record.get("ecc_volatile_uncorrected") or 0) + 1)


def _gpu_lost(records: list[dict[str, Any]], after: list[dict[str, Any]], mine: list[dict[str, Any]], at: float,
              drill: Drill, options: dict[str, Any], where: str) -> None:
    replaced = {id(r) for r in after}
    for index, record in enumerate(records):  # from --at on the GPU answers no more: each poll says so, as NVML does
        if id(record) in replaced:
            records[index] = {"kind": "lost", "t": record["t"], "gpu": drill.gpu, "reason": LOST_REASON,
                              "injected": True}


def _stuck_sensor(records: list[dict[str, Any]], after: list[dict[str, Any]], mine: list[dict[str, Any]], at: float,
                  drill: Drill, options: dict[str, Any], where: str) -> None:
    frozen = after[0].get("temperature_c")
    if not isinstance(frozen, (int, float)):
        raise InjectError(f"{where}: GPU {drill.gpu} has no temperature at +{show_seconds(drill.at_s)} to freeze")
    for record in after:  # the load goes on moving in the trace: only the reading stands still
        _mark(record, temperature_c=frozen)


def _util_collapse(records: list[dict[str, Any]], after: list[dict[str, Any]], mine: list[dict[str, Any]],
                   at: float, drill: Drill, options: dict[str, Any], where: str) -> None:
    before = [r for r in mine if r["t"] < at]
    busy = float(options.get("busy_pct", 50))
    if not before or not isinstance(before[-1].get("utilization_gpu_pct"), (int, float)) or \
            before[-1]["utilization_gpu_pct"] < busy:
        raise InjectError(f"{where}: GPU {drill.gpu} is not busy (>= {busy:g} %) just before --at "
                          f"{show_seconds(drill.at_s)}: a collapse needs a busy GPU")
    for record in after:  # 0 % while the job's processes and memory stay: a hung job, not one that ended
        _mark(record, utilization_gpu_pct=0)


_WRITERS: dict[str, Writer] = {
    "xid": _xid, "temperature": _temperature, "ecc": _ecc, "gpu-lost": _gpu_lost,
    "stuck-sensor": _stuck_sensor, "util-collapse": _util_collapse,
}


def inject_file(source: Path, out: Path, drill: Drill, rules: dict[str, dict[str, Any]]) -> None:
    """Read ``source``, write the drill trace to ``out`` (never over ``source``)."""
    from gpuhealth import safefile

    try:
        if out.exists() and out.resolve() == source.resolve():
            raise InjectError(f"{out}: the drill is written to a new file, never over the trace it reads")
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InjectError(f"{source}: cannot read ({exc})") from exc
    written = inject(text, drill, rules, str(source))
    try:
        safefile.write_file(out, written, mode=0o644)
    except OSError as exc:
        raise InjectError(f"{out}: cannot write ({exc})") from exc


# --------------------------------------------------------------------------- the monitor's side

DRILL_PREFIX = "DRILL: "


def drill_gpus(events: Any) -> set[int]:
    """The GPUs that records ``gpuhealth inject`` wrote stand on, in one poll's events."""
    return {e.gpu for e in events if getattr(e, "injected", None) is True}


def mark(alerts: list[Any], drilled: set[int]) -> list[Any]:
    """Each alert on a drilled GPU (or a host alert standing on one) as a drill: "DRILL: " leads its message,
    which every notifier carries (the line, the webhook's JSON, serve's /metrics and API)."""
    from dataclasses import replace

    out = []
    for alert in alerts:
        on_drill = alert.gpu in drilled or (alert.gpu is None and any(b.gpu in drilled for b in alert.about))
        if on_drill and not alert.drill:
            message = alert.message if alert.message.startswith(DRILL_PREFIX) else DRILL_PREFIX + alert.message
            alert = replace(alert, message=message, drill=True)
        out.append(alert)
    return out


# --------------------------------------------------------------------------- the command

@click.command("inject")
@click.argument("kind", type=click.Choice(sorted(KINDS)))
@click.argument("code", required=False, type=click.IntRange(0, 1_000_000))
@click.option("--gpu", type=click.IntRange(0, 1023), required=True, help="The GPU (index in the trace).")
@click.option("--into", "source", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The replay trace to copy (read only; `gpuhealth monitor --record` writes one).")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="Where to write the drill trace (a new file; never the trace read).")
@click.option("--at", "at_text", default=f"{DEFAULT_AT_S:g}s", show_default=True,
              help="When the fault starts, after the trace's first record (30s, 2m, or seconds).")
@click.option("--config", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="gpuhealth's config file: the rules' thresholds and durations the fault must meet.")
def inject_command(kind: str, code: int | None, gpu: int, source: Path, out: Path, at_text: str,
                   config: Path | None) -> None:
    """Write a known fault into a copy of a replay trace, for a drill of the alert routing.

    KIND is xid (with its CODE: `inject xid 79`), temperature, ecc, gpu-lost, stuck-sensor or util-collapse.
    Every record written is marked injected; replaying the copy (`gpuhealth monitor --source
    replay:OUT`) pages with "DRILL" in each alert on that GPU, and keeps the drill out of the history's
    faults. Traces only: there is no kernel-log source to inject into.
    """
    from gpuhealth.config import load

    if (kind == "xid") != (code is not None):
        raise CannotRun("inject: xid takes its code (`inject xid 79`); the other kinds take none")
    try:
        at_s = parse_duration(at_text)
        rules = load(config)["rules"]
    except ValueError as exc:
        raise CannotRun(f"inject: {exc}") from exc
    drill = Drill(kind, gpu, at_s, code)
    try:
        inject_file(source, out, drill, rules)
    except InjectError as exc:
        raise CannotRun(str(exc)) from exc
    rule = KINDS[kind][0]
    click.echo(f"{out}: {drill.describe()}; replay it with `gpuhealth monitor --source replay:{out}` "
               f"(the {rule} rule fires, each alert on GPU {gpu} saying DRILL)")
