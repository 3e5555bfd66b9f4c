"""``gpuhealth watch``: what every GPU reads now and which alerts are active, as a compact terminal view.

``WatchState`` keeps the latest event per GPU and the alerts that are firing (fed by the same
``RuleSet`` the monitor runs, in memory); ``render`` turns a state into a rich renderable and does
nothing else, so tests render it to a recording console and read the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from .rules import Alert
from .sample import Event, GpuLost, Sample

FULL, EMPTY = "█", "░"
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
_FIXED = 42  # the characters of a GPU line that are not bars (labels and numbers)


@dataclass
class WatchState:
    source: str
    latest: dict[int, Sample] = field(default_factory=dict)
    lost: dict[int, str] = field(default_factory=dict)  # GPU -> why, while its latest event is a GpuLost
    alerts: dict[tuple[str, int | None, str], Alert] = field(default_factory=dict)  # firing, by identity
    t: float | None = None  # the newest event's time
    steps: int = 0
    acks: list[Any] = field(default_factory=list)  # acks.Ack of this host's history (a live source only)

    def update(self, events: Sequence[Event], alerts: Sequence[Alert]) -> None:
        for event in events:
            self.t = event.t if self.t is None else max(self.t, event.t)
            if isinstance(event, Sample):
                self.latest[event.gpu] = event
                self.lost.pop(event.gpu, None)
            elif isinstance(event, GpuLost):
                self.lost[event.gpu] = event.reason
        for alert in alerts:
            if alert.state == "firing":
                self.alerts[alert.identity] = alert
            else:
                self.alerts.pop(alert.identity, None)
        self.steps += 1


def bar(fraction: float | None, width: int, style: str = "green") -> Text:
    """``width`` cells, filled in proportion (clamped to 0..1); all empty when the fraction is unknown."""
    if fraction is None:
        return Text(EMPTY * width, style="dim")
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return Text.assemble((FULL * filled, style), (EMPTY * (width - filled), "dim"))


def _level(fraction: float | None, warn: float, high: float) -> str:
    if fraction is None or fraction < warn:
        return "green"
    return "yellow" if fraction < high else "red"


def _ratio(value: float | None, whole: float | None) -> float | None:
    return value / whole if value is not None and whole else None


def _num(value: float | None, spec: str) -> str:
    """``value`` formatted, or "?" padded to the same width when it was not read (columns stay put)."""
    if value is None:
        width = spec.split(".")[0]
        return "?".rjust(int(width) if width.isdigit() else 1)
    return format(value, spec)


def _gpu_lines(sample: Sample, width: int) -> list[Text]:
    util = sample.utilization_gpu_pct
    used_gib = None if sample.memory_used_mib is None else sample.memory_used_mib / 1024
    total_gib = None if sample.memory_total_mib is None else sample.memory_total_mib / 1024
    memory = _ratio(sample.memory_used_mib, sample.memory_total_mib)
    temp, slowdown = sample.temperature_c, sample.temperature_slowdown_c
    heat = _ratio(temp, slowdown) if slowdown else (None if temp is None else temp / 100)
    power = _ratio(sample.power_w, sample.power_limit_w)
    temp_text = f"{_num(temp, '3.0f')}/{slowdown:.0f} °C" if slowdown else f"{_num(temp, '3.0f')} °C   "
    power_text = f"{_num(sample.power_w, '4.0f')}/{_num(sample.power_limit_w, '.0f')} W"
    name = f"GPU {sample.gpu:<3}"
    first = Text.assemble(
        (name, "bold"), "util ", bar(None if util is None else util / 100, width, "cyan"),
        f" {_num(util, '3.0f')} %", "   mem ", bar(memory, width, _level(memory, 0.9, 0.98)),
        f" {_num(used_gib, '5.1f')}/{_num(total_gib, '.0f')} GiB")
    second = Text.assemble(
        " " * len(name), "temp ", bar(heat, width, _level(heat, 0.9, 0.95)), f" {temp_text}",
        "   pwr ", bar(power, width, _level(power, 0.9, 1.0)), f" {power_text}")
    return [first, second]


def _clock(t: float | None) -> str:
    if t is None:
        return "waiting for the first sample"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _acknowledged(acks: list[Any], alert: Alert) -> bool:
    if not acks:
        return False
    from .acks import covers

    return any(ack.active(alert.t) and covers(ack, alert) for ack in acks)


def render(state: WatchState, width: int = 80) -> RenderableType:
    """The whole view for a terminal ``width`` columns wide: a header, two lines per GPU, the alerts."""
    bar_width = max(5, min(30, (width - _FIXED) // 2))
    gpus = sorted(set(state.latest) | set(state.lost))
    lines: list[Text] = [Text.assemble(("gpuhealth watch", "bold"), f"  {state.source}  {_clock(state.t)}  ",
                                       f"{len(gpus)} GPU(s)", no_wrap=True, overflow="ellipsis")]
    for gpu in gpus:
        if gpu in state.lost:
            line = Text.assemble((f"GPU {gpu:<3}", "bold"), ("LOST", "bold red"), f" {state.lost[gpu]}")
            lines.append(line)
        else:
            lines.extend(_gpu_lines(state.latest[gpu], bar_width))
    if not gpus:
        lines.append(Text("no GPU has answered yet", style="dim"))
    order = {"critical": 0, "warning": 1, "info": 2}
    alerts = sorted(state.alerts.values(), key=lambda a: (order.get(a.severity, 3), a.gpu if a.gpu is not None
                                                            else -1, a.rule, a.key))
    lines.append(Text(""))
    lines.append(Text(f"Alerts ({len(alerts)})" if alerts else "No active alerts", style="bold"))
    for alert in alerts:
        where = "host" if alert.gpu is None else f"gpu={alert.gpu}"
        rule = f"{alert.rule}[{alert.key}]" if alert.key else alert.rule
        acked = " (acknowledged)" if _acknowledged(state.acks, alert) else ""  # before the message: never cut
        lines.append(Text.assemble((f"{alert.severity:<8}", SEVERITY_STYLE.get(alert.severity, "")),
                                   f" {rule} {where}{acked}: {alert.message}"))
    for line in lines:
        line.no_wrap, line.overflow = True, "ellipsis"
    return Group(*lines)
