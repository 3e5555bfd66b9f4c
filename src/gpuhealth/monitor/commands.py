"""Click commands of the monitor layer: ``monitor``, ``history`` and ``watch``. The lead registers them
on the main group; everything heavy is imported inside the command bodies so start-up stays fast."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuhealth.exits import CannotRun
from gpuhealth.inert import one_line

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 30  # fits an 80-column terminal beside the numbers


def _duration(value: str, what: str, key: str | None = None) -> float:
    """Seconds of an option or setting; with ``key`` (``monitor.interval``) within that setting's bounds."""
    from .config import check_duration, parse_duration

    try:
        return parse_duration(value) if key is None else check_duration(key, value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=what) from exc


def stop_on_signals(stop: threading.Event) -> Callable[[], None]:
    """Set the ``threading.Event`` ``stop`` on SIGTERM and SIGINT; returns the function that puts the previous
    handlers back.

    The handler only writes a byte to a pipe, and a helper thread sets the event. Setting it in the handler
    itself could deadlock: ``Event.set`` takes the event's lock, and the main thread holds that lock for a few
    bytecodes in every ``stop.wait`` between polls, where a signal may land; the process then hung on SIGTERM
    until systemd's (or the test's) SIGKILL, losing the history flush.
    """
    import os
    import signal
    import threading

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # a handler never blocks

    def relay() -> None:
        try:
            if os.read(read_fd, 1):
                stop.set()
        finally:
            os.close(read_fd)

    def handler(signum: int, frame: Any) -> None:
        try:
            os.write(write_fd, b"s")
        except OSError:  # a second signal into a full or closed pipe: the first one already asked
            pass

    threading.Thread(target=relay, name="gpuhealth-signals", daemon=True).start()
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.close(write_fd)  # the relay reads end-of-file and ends without setting anything

    return restore


def _settings(config: Path | None) -> Any:
    """gpuhealth's one configuration (gpuhealth.config.Settings): defaults, the system and user files, then
    ``config``."""
    from gpuhealth.config import load

    try:
        return load(config)
    except ValueError as exc:
        raise CannotRun(str(exc)) from exc


def _notifiers(options: dict[str, Any]) -> list[Any]:
    from .config import parse_duration
    from .notify import LogFileNotifier, StreamNotifier, WebhookNotifier

    out: list[Any] = [StreamNotifier()] if options["stderr"] else []
    try:
        if options["log_file"]:
            out.append(LogFileNotifier(Path(options["log_file"])))
        if options["webhook_url"]:
            out.append(WebhookNotifier(options["webhook_url"], parse_duration(options["webhook_timeout"]),
                                       int(options["webhook_retries"])))
    except (OSError, ValueError) as exc:
        raise CannotRun(f"notifier: {exc}") from exc
    return out


def _db_path(given: Path | None, configured: str, reading: bool) -> Path:
    from .daemon import default_db

    if given is not None:
        return given
    if configured:
        return Path(configured)
    system = Path("/var/lib/gpuhealth/monitor.db")
    if reading:  # `history` must not create directories: read the system file when there is one
        return system if system.exists() else Path.home() / ".local/state/gpuhealth/monitor.db"
    return default_db()


def _held_mib(options: dict[str, Any]) -> float:
    """`[monitor] held_mib`, the one setting behind "a job still holds the GPU" (sample.job_holds)."""
    value = options["held_mib"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise CannotRun(f"monitor.held_mib must be a number of MiB >= 0, not {value!r}")
    return float(value)


def _build(config: Path | None, interval: str | None, check_every: str | None, db: Path | None,
           source_spec: str, record: Path | None, replay_speed: float, use_store: bool = True,
           settings: Any = None) -> Any:
    import functools
    import time

    from gpuhealth import __version__

    from .daemon import CheckRunner, Monitor, open_source, run_full_check
    from .notify import Dispatcher
    from .rules import RuleSet
    from .sources import TraceWriter
    from .store import Store, StoreError

    settings = _settings(config) if settings is None else settings
    options = settings["monitor"]
    seconds = _duration(interval or options["interval"], "--interval", "monitor.interval")
    every = _duration(check_every or options["check_every"], "--check-every", "monitor.check_every")
    if not isinstance(options["kernel_log"], bool):
        raise CannotRun(f"monitor.kernel_log must be true or false, not {options['kernel_log']!r}")
    try:
        rules = RuleSet.from_config(settings.rules(), _held_mib(settings["monitor"]))
        expect = settings.expectations()
        source = open_source(source_spec, seconds, _duration(options["nvml_timeout"], "nvml_timeout"), replay_speed)
    except (ValueError, OSError) as exc:
        raise CannotRun(str(exc)) from exc
    dispatcher = Dispatcher(_notifiers(settings["notify"]))
    store = None
    if use_store:
        path = _db_path(db, options["db"], reading=False)
        try:
            store = Store(path, _duration(options["raw_keep"], "raw_keep"), _duration(options["rollup_keep"],
                                                                                        "rollup_keep"))
        except StoreError as exc:  # no history, but sampling and alerts go on
            click.echo(one_line(f"gpuhealth monitor: {exc}; running without history"), err=True)
    replaying = source_spec.startswith("replay:")  # a full check of this host says nothing about a trace
    boot = _boot_id(source, replaying)
    if store is not None:  # acknowledgements need only the history; boots need a boot id too
        from .boots import FaultMemory

        dispatcher.memory = FaultMemory(store, boot, lambda text: click.echo(one_line(f"gpuhealth monitor: {text}"),
                                                                             err=True))
    if store is not None and not replaying:  # a capture records this host: nothing of a replayed trace
        from .capture import Capture

        dispatcher.capture = Capture(Path(store.path).parent / "captures", _duration(options["capture_every"],
                                     "capture_every", "monitor.capture_every"), int(options["capture_keep"]),
                                     log=lambda text: click.echo(one_line(f"gpuhealth monitor: {text}"), err=True))
    if options["kernel_log"] and not replaying:  # each Xid's kernel line, for the rules that decode it
        from .kmsg import follow

        source = follow(source, boot, store, lambda text: click.echo(one_line(f"gpuhealth monitor: {text}"),
                                                                     err=True))
    recorder = None
    if record is not None:
        try:
            recorder = TraceWriter(record, f"gpuhealth {__version__} monitor --record",
                                   f"recorded live from source {source_spec!r}", None if replaying else boot)
        except OSError as exc:
            raise CannotRun(f"{record}: {exc.strerror or exc}") from exc
    checks = None
    if every > 0 and not replaying:
        from .kmsg import KmsgSource
        from .xidlog import XidLogFeed

        # the kernel log's Xids for the correlation rules: the follower reads those from its start on itself
        since = time.time() if isinstance(source, KmsgSource) else None
        xidlog = XidLogFeed(boot, store, lambda text: click.echo(one_line(f"gpuhealth monitor: {text}"), err=True),
                            since)
        checks = CheckRunner(every, run=functools.partial(run_full_check, expect), xidlog=xidlog)
    try:
        from .correlate import from_config

        correlator = from_config(options, store, lambda text: click.echo(one_line(f"gpuhealth monitor: {text}"),
                                                                         err=True))
    except ValueError as exc:
        raise CannotRun(str(exc)) from exc
    ports = None
    ports_every = _duration(options["ports_every"], "ports_every", "monitor.ports_every")
    if correlator.rows and ports_every > 0 and not replaying:  # this host's ports say nothing about a trace
        from gpuhealth.host import LocalHost

        from .ports import PortWatch

        ports = PortWatch(LocalHost(), expect.ib_exclude, ports_every,
                          log=lambda text: click.echo(one_line(f"gpuhealth monitor: {text}"), err=True))
    return Monitor(source, rules, dispatcher, store, recorder, seconds, checks, correlator=correlator, ports=ports)


def _boot_id(source: Any, replaying: bool) -> str | None:
    """The boot the monitor starts in: a replayed trace's own (None for one without), else this host's."""
    if replaying:
        return getattr(source, "boot_id", None)
    from .boots import read_boot_id

    return read_boot_id()


def describe(mon: Any) -> str:
    """The start line's facts: what is sampled, where history and alerts go, how many rules watch.
    A webhook is named by its host only (its path or query may hold a token)."""
    from urllib.parse import urlsplit

    from .notify import LogFileNotifier, StreamNotifier, WebhookNotifier, writes_to_journal
    from .sources import NvmlSource, ReplaySource, SmiSource

    source, follows = mon.source, ""
    while hasattr(source, "inner"):  # serve's TeeSource and the kernel log follower wrap the real one
        follows = follows or (" and the kernel log" if hasattr(source, "follower") else "")
        source = source.inner
    sampled = ("NVML" if isinstance(source, NvmlSource) else "nvidia-smi" if isinstance(source, SmiSource)
               else f"replay of {source.path}" if isinstance(source, ReplaySource) else type(source).__name__)
    targets = []
    for notifier in mon.dispatcher.notifiers:
        if isinstance(notifier, StreamNotifier):
            targets.append("the journal" if writes_to_journal(notifier.stream or sys.stderr) else "stderr")
        elif isinstance(notifier, LogFileNotifier):
            targets.append(str(notifier.path))
        elif isinstance(notifier, WebhookNotifier):
            parts = urlsplit(notifier.url)
            targets.append(f"webhook {parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}")
        elif getattr(notifier, "every_alert", False):
            targets.append("the dashboard and /metrics")
    history = mon.store.path if mon.store is not None else "off"
    rules = len(mon.rules.rules)
    return (f"source {sampled}{follows}, history {history}, {rules} rule{'s' if rules != 1 else ''}, alerts to "
            f"{', '.join(targets) if targets else 'nowhere (no notifier: see [notify] in docs/monitor.md)'}")


source_option = click.option("--source", "source_spec", default="auto", show_default=True,
                             help="nvml, smi (streaming nvidia-smi), replay:FILE, or auto (NVML, else nvidia-smi).")
config_option = click.option("--config", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                             help="gpuhealth's config file (TOML), over /etc/gpuhealth/config.toml and "
                                  "~/.config/gpuhealth/config.toml (see docs/configuration.md).")
speed_option = click.option("--replay-speed", type=float, default=1.0, show_default=True,
                            help="With replay:FILE: 1 is real time, 0 as fast as possible.")


@click.command()
@click.option("--interval", help="Sampling interval (default 1s).")
@click.option("--check-every", help="Run the full check this often (default 10m; 0 disables).")
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), help="History database (SQLite).")
@source_option
@click.option("--record", type=click.Path(path_type=Path, dir_okay=False), help="Also write a trace to FILE.")
@config_option
@speed_option
def monitor(interval: str | None, check_every: str | None, db: Path | None, source_spec: str,
            record: Path | None, config: Path | None, replay_speed: float) -> None:
    """Sample every GPU, keep history, raise alerts (foreground; SIGTERM stops it cleanly)."""
    import threading

    mon = _build(config, interval, check_every, db, source_spec, record, replay_speed)
    # one line at once, so that a healthy box (no alert for hours) does not look hung
    click.echo(one_line(f"gpuhealth monitor: started: {describe(mon)}"), err=True)
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        mon.run(stop)
    finally:
        mon.close()
        restore()


@click.command()
@source_option
@click.option("--interval", default="1s", show_default=True, help="How often to sample and redraw.")
@config_option
@speed_option
@click.option("--steps", type=click.IntRange(min=1), hidden=True, help="Stop after N samples (tests, demos).")
def watch(source_spec: str, interval: str, config: Path | None, replay_speed: float, steps: int | None) -> None:
    """A live view: bars per GPU (utilisation, memory, temperature, power) and the active alerts.

    The monitor's alert rules run in memory; nothing is stored and nothing is notified. Ctrl-C exits.
    """
    import threading
    import time

    from rich.live import Live

    from gpuhealth import inert

    from .daemon import open_source
    from .rules import RuleSet
    from .watch import WatchState, render

    settings = _settings(config)
    seconds = _duration(interval, "--interval", "monitor.interval")
    try:
        rules = RuleSet.from_config(settings.rules(), _held_mib(settings["monitor"]))
        source = open_source(source_spec, seconds, _duration(settings["monitor"]["nvml_timeout"], "nvml_timeout"),
                             replay_speed, log=lambda text: click.echo(one_line(f"gpuhealth watch: {text}"), err=True))
    except (ValueError, OSError) as exc:
        raise CannotRun(str(exc)) from exc
    state = WatchState(source_spec, acks=[] if source_spec.startswith("replay:") else _host_acks(settings))
    console = inert.console(highlight=False)
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        with Live(render(state, console.width), console=console, auto_refresh=False) as live:
            next_at = time.monotonic()
            while not stop.is_set():
                events = source.poll()
                state.update(events, rules.feed(events))
                live.update(render(state, console.width), refresh=True)
                if (steps is not None and state.steps >= steps) or getattr(source, "exhausted", False):
                    break
                next_at = max(next_at + seconds, time.monotonic())
                stop.wait(next_at - time.monotonic())
    finally:
        source.close()
        restore()


def _host_acks(settings: dict[str, Any]) -> list[Any]:
    """This host's acknowledgements (`gpuhealth ack`) for `watch` of a live source: read from the history when there
    is one; none when there is not or it cannot be read (watch shows the alerts all the same)."""
    from . import acks
    from .store import Store, StoreError

    path = _db_path(None, settings["monitor"]["db"], reading=True)
    if not os.path.lexists(path):
        return []
    try:
        store = Store(path)
        try:
            return acks.load(store)
        finally:
            store.close()
    except StoreError:
        return []


def sparkline(points: list[tuple[float, float]], start: float, end: float, width: int = 40) -> str:
    """Values averaged into ``width`` time buckets, drawn with block characters; gaps are spaces."""
    if not points or end <= start:
        return ""
    buckets: list[list[float]] = [[] for _ in range(width)]
    for t, value in points:
        buckets[min(width - 1, max(0, int((t - start) / (end - start) * width)))].append(value)
    means = [sum(b) / len(b) if b else None for b in buckets]
    known = [m for m in means if m is not None]
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    return "".join(" " if m is None else SPARKS[min(7, int((m - low) / span * 8))] for m in means)


@click.command()
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), help="History database.")
@click.option("--gpu", type=int, help="Only this GPU (default: all).")
@click.option("--metric", default="temperature", show_default=True, help="Metric or alias (temperature, power ...).")
@click.option("--since", default="1h", show_default=True, help="How far back (30m, 6h, 7d).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV instead of a table.")
@config_option
def history(db: Path | None, gpu: int | None, metric: str, since: str, as_csv: bool, config: Path | None) -> None:
    """Show a metric's history per GPU with sparklines, or export it as CSV."""
    import time

    from .sample import resolve_metric
    from .store import Store, StoreError

    try:
        name = resolve_metric(metric)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metric") from exc
    settings = _settings(config)["monitor"]
    path = _db_path(db, settings["db"], reading=True)
    if not os.path.lexists(path):  # a link, even a dangling one, is refused by Store
        raise CannotRun(f"{path}: no history yet (run `gpuhealth monitor`, or pass --db)")
    end = time.time()
    start = end - _duration(since, "--since")
    try:
        store = Store(path, _duration(settings["raw_keep"], "raw_keep"),
                      _duration(settings["rollup_keep"], "rollup_keep"))
        gpus = [gpu] if gpu is not None else store.gpus()
        series = [store.series(g, name, start, end) for g in gpus]
        store.close()
    except StoreError as exc:
        raise CannotRun(str(exc)) from exc
    if not gpus:  # a database the monitor created and has not written to yet: say so, not an empty table
        empty = f"{path}: the history holds no samples yet (is `gpuhealth monitor` running and writing here?)"
        if as_csv:
            _print_csv(series)
        click.echo(empty, err=as_csv)
        return
    if as_csv:
        _print_csv(series)
    else:
        _print_table(series, start, end, since)


def _print_csv(series: list[Any]) -> None:
    import csv
    from datetime import datetime, timezone

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["time", "gpu", "metric", "resolution", "min", "avg", "max"])
    for s in series:
        for t, low, mean, high in s.points:
            writer.writerow([datetime.fromtimestamp(t, timezone.utc).isoformat(), s.gpu, s.metric, s.resolution,
                             f"{low:g}", f"{mean:g}", f"{high:g}"])


def _print_table(series: list[Any], start: float, end: float, since: str) -> None:
    from rich.table import Table

    from gpuhealth import inert

    table = Table(title=f"{series[0].metric if series else ''}, last {since}", title_justify="left")
    for column in ("GPU", "points", "min", "avg", "max", "last"):
        table.add_column(column, justify="right")
    table.add_column("trend", no_wrap=True, min_width=SPARK_WIDTH)
    for s in series:
        if not s.points:
            table.add_row(str(s.gpu), "0", "", "", "", "", "no data")
            continue
        lows, means, highs = zip(*((p[1], p[2], p[3]) for p in s.points), strict=True)
        table.add_row(str(s.gpu), f"{len(s.points)} {s.resolution}", f"{min(lows):g}",
                      f"{sum(means) / len(means):.1f}", f"{max(highs):g}", f"{means[-1]:g}",
                      sparkline([(p[0], p[2]) for p in s.points], start, end, SPARK_WIDTH))
    inert.console(highlight=False).print(table)


USAGE_COLUMNS = ("gpu", "day", "hours_monitored", "hours_busy", "hours_idle", "hours_held_idle",
                 "mean_utilization_pct", "energy_kwh", "energy_from")


@click.command()
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), help="History database.")
@click.option("--gpu", type=int, help="Only this GPU (default: all).")
@click.option("--since", default="7d", show_default=True,
              help="How far back (1d, 30d): the history holds rollup_keep of it (30 days unless configured).")
@click.option("--price", type=click.FloatRange(min=0),
              help="Price of one GPU-hour (overrides usage.price_per_gpu_hour).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV instead of a table.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@config_option
def usage(db: Path | None, gpu: int | None, since: str, price: float | None, as_csv: bool, fmt: str,
          config: Path | None) -> None:
    """Hours busy, idle and idle with memory held, mean utilisation and energy, per GPU and UTC day,
    from the monitor's history; with a price per GPU-hour, what the idle hours cost."""
    import json
    import time

    from .store import Store, StoreError
    from .usage import usage as compute

    settings = _settings(config)
    options = settings["monitor"]
    price = price if price is not None else (float(settings["usage"]["price_per_gpu_hour"]) or None)
    path = _db_path(db, options["db"], reading=True)
    if not os.path.lexists(path):  # a link, even a dangling one, is refused by Store
        raise CannotRun(f"{path}: no history yet (run `gpuhealth monitor`, or pass --db)")
    end = time.time()
    start = end - _duration(since, "--since")
    try:
        store = Store(path, _duration(options["raw_keep"], "raw_keep"), _duration(options["rollup_keep"],
                                                                                    "rollup_keep"))
        days = compute(store, start, end, [gpu] if gpu is not None else None, _held_mib(options))
        store.close()
    except StoreError as exc:
        raise CannotRun(str(exc)) from exc
    rows = [d.as_json(price) for d in days]
    columns = USAGE_COLUMNS + (("cost_idle", "cost_held_idle") if price is not None else ())
    if fmt == "json":
        click.echo(json.dumps({"since": start, "until": end, "price_per_gpu_hour": price, "days": rows}, indent=2))
    elif as_csv:
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if r[k] is None else r[k]) for k in columns} for r in rows)
    else:
        _print_usage(rows, columns, since, price)


def _print_usage(rows: list[dict[str, Any]], columns: tuple[str, ...], since: str, price: float | None) -> None:
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table

    from gpuhealth import inert, termwidth

    title = f"GPU usage per UTC day, last {since}" + (f", {price:g} per GPU-hour" if price is not None else "")
    # a rule under the header and none between columns: 11 columns fit 80 with their headings wrapped
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    heads = {"gpu": "GPU", "day": "day", "hours_monitored": "h monitored", "hours_busy": "h busy",
             "hours_idle": "h idle", "hours_held_idle": "h held idle", "mean_utilization_pct": "mean util %",
             "energy_kwh": "kWh", "energy_from": "from", "cost_idle": "idle cost", "cost_held_idle": "held idle cost"}
    cells = [["" if row[c] is None else f"{row[c]:.2f}" if isinstance(row[c], float) and c.startswith(
        ("hours", "cost")) else str(row[c]) for c in columns] for row in rows]
    for column in columns:
        table.add_column(heads[column], justify="left" if column in ("day", "energy_from") else "right")
    for cell in cells:
        table.add_row(*cell)
    if not rows:
        table.caption = "no utilisation readings in this period"
    # The terminal's width (unwrapped when piped): headings wrap at their spaces, values never do. Where even the
    # narrowest layout does not fit, rich would cut values ("2026-1…" names no day): then the table is drawn at its
    # natural width instead, wider than the terminal but with every value whole.
    console = inert.console(highlight=False, width=termwidth.console_width())
    natural = Measurement.get(console, console.options.update_width(termwidth.UNWRAPPED), table).maximum
    if natural > console.width:
        # narrowest: each column as wide as its widest value or heading word (rich's own squeeze cuts values)
        for i, column in enumerate(table.columns):
            column.width = max([len(cell[i]) for cell in cells] + [len(w) for w in heads[columns[i]].split()])
        if Measurement.get(console, console.options.update_width(termwidth.UNWRAPPED), table).maximum > console.width:
            for column in table.columns:
                column.width = None
            console = inert.console(highlight=False, width=natural)
    console.print(table)


@click.command()
@click.argument("code", required=False)
@click.option("--gpu", type=click.IntRange(0, 1023), help="Only this GPU (default: every GPU and the host).")
@click.option("--until", "until_text", help="Until when: a duration (8h, 2d) or a time (2026-12-07T18:00, UTC unless "
              "it says otherwise). Default: until cleared.")
@click.option("--reason", help="Why (a ticket, who is on it): required to acknowledge.")
@click.option("--list", "listing", is_flag=True, help="List the acknowledgements.")
@click.option("--clear", is_flag=True, help="Remove the acknowledgement of CODE (and --gpu).")
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), help="History database.")
@config_option
def ack(code: str | None, gpu: int | None, until_text: str | None, reason: str | None, listing: bool, clear: bool,
        db: Path | None, config: Path | None) -> None:
    """Acknowledge a fault: it stops paging until --until (or until cleared), and is shown as acknowledged
    everywhere, never hidden. CODE: a check code (GH302), an Xid (xid:79) or a rule (temperature, ecc:KEY)."""
    import time

    from . import acks
    from .store import Store, StoreError

    settings = _settings(config)["monitor"]
    path = _db_path(db, settings["db"], reading=listing)
    if listing and not os.path.lexists(path):
        click.echo(f"no acknowledgements ({path}: no history yet)")
        return
    if not listing and code is None:
        raise CannotRun("ack: give CODE (GH302, xid:79, temperature), or --list")
    now = time.time()
    try:
        name = acks.normalize(code) if code is not None else ""
        until = acks.parse_until(until_text, now) if until_text and not listing and not clear else None
        why = acks.check_reason(reason or "") if not listing and not clear else ""
    except ValueError as exc:
        raise CannotRun(f"ack: {exc}") from exc
    try:
        store = Store(path, _duration(settings["raw_keep"], "raw_keep"), _duration(settings["rollup_keep"],
                                                                                    "rollup_keep"))
        try:
            if listing:
                _list_acks(acks.load(store), now)
            elif clear:
                gone = store.clear_ack(name, gpu)
                where = "every GPU" if gpu is None else f"GPU {gpu}"
                click.echo(f"cleared {name} on {where}" if gone else f"no acknowledgement of {name} on {where}")
            else:
                store.add_ack(name, gpu, until, why, now)
                where = "every GPU and the host" if gpu is None else f"GPU {gpu}"
                click.echo(f"acknowledged {name} on {where} {acks.shown_time(until)}: not paged meanwhile, still "
                           "shown; a running monitor or serve reads it within a minute")
        finally:
            store.close()
    except StoreError as exc:
        raise CannotRun(str(exc)) from exc


def _list_acks(items: list[Any], now: float) -> None:
    from . import acks

    if not items:
        click.echo("no acknowledgements")
        return
    for item in items:
        where = "all" if item.gpu is None else f"gpu {item.gpu}"
        state = "" if item.active(now) else " (expired)"
        click.echo(one_line(f"{item.code} {where} {acks.shown_time(item.until)}{state}: {item.reason} "
                            f"(given {acks.stamp(item.t)})"))
