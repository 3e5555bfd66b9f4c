"""The correlation table (knowledge/correlations.csv) and its engine (monitor/correlate.py).

Each row gets a trace generated from its own parameters that fires it, and near misses that do not: one fewer
than its count, the same spread past its window, all inside one burst, split across GPUs (or kept on one GPU
for a spread row), and, for a decode row, the same Xid whose kernel text does not say what the row needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_fakes import GENERATED_BY, NOTE, T0

from gpuhealth.monitor.config import check_duration, load_config
from gpuhealth.monitor.correlate import (
    PORT_COUNTERS,
    SLOWDOWN,
    Correlator,
    Occurrence,
    Row,
    decode,
    evaluate,
    from_config,
    load_rows,
    markdown,
)
from gpuhealth.monitor.daemon import Monitor
from gpuhealth.monitor.notify import Dispatcher, actions_of
from gpuhealth.monitor.rules import RuleSet
from gpuhealth.monitor.sample import Sample, XidEvent, sane
from gpuhealth.monitor.sources import ReplaySource, write_trace
from gpuhealth.monitor.store import Store

ROOT = Path(__file__).resolve().parents[2]
LINES = ROOT / "tests" / "data" / "correlate" / "xid_lines.txt"
ROWS = load_rows()
NOW = T0 + 3 * 86400.0  # evaluation time: well after T0, so a window never reaches before the trace


def _text(row: Row, link: int, matching: bool = True) -> str:
    """A kernel text for ``row``'s Xid: one that has what the row's detail asks for, or one that does not."""
    if not row.detail:
        return ""
    name, _, want = row.detail.partition(":")
    if name.startswith("reg"):
        registers = [0] * 7
        registers[int(name[3:])] = (1 << int(want.split()[0])) if matching else 0
        return f"NVLink: fatal error detected on link {link}({', '.join(hex(r) for r in registers)})"
    if name == "nvl5":
        other = "Nonfatal" if want == "Fatal" else "Fatal"
        return f"NETIR_LINK_EVT {want if matching else other} XC0 i0 Link {link:02d} (0x004505c6 0x00000000)"
    assert name == "recovery"
    return f"GPU recovery action changed from 0x0 (None) to 0x9 ({want if matching else 'None'})"


def _one(row: Row, t: float, gpu: int = 0, link: int = 3, matching: bool = True, amount: float = 1.0) -> Occurrence:
    if row.match.startswith("metric:"):
        counter = row.match.removeprefix("metric:")
        port = f"mlx5_{gpu}/1" if counter in PORT_COUNTERS else ""  # a port's counter: the port, not a GPU
        return Occurrence(t, -1 if port else gpu, counter, amount=amount, text=port)
    span = row.xids()
    xid = 79 if span is None else span[0]  # class:fatal: Xid 79, a critical one in the catalogue
    return Occurrence(t, gpu, "xid", xid, 1.0, _text(row, link, matching))


def _spaced(row: Row, n: int, gpus: list[int] | None = None, step: float | None = None) -> list[Occurrence]:
    """``n`` occurrences ending at NOW, each in a burst of its own (unless ``step`` says otherwise)."""
    step = (row.burst + 1.0) if step is None else step
    per = row.count / n if row.kind == "rate" else 1.0  # a rate row: the counter rises by count in all
    return [_one(row, NOW - (n - 1 - i) * step, gpu=(gpus[i] if gpus else 0), amount=per) for i in range(n)]


def fires(row: Row) -> list[Occurrence]:
    n = int(row.count)
    if row.scope == "different_gpus":
        return _spaced(row, n, gpus=list(range(n)))
    if row.kind == "rate":
        return _spaced(row, 2, step=row.window / 4)  # two rises inside the window, adding up to the count
    return _spaced(row, n)


def near_misses(row: Row) -> dict[str, list[Occurrence]]:
    n = int(row.count)
    misses: dict[str, list[Occurrence]] = {}
    if row.kind == "rate":
        misses["short of the count"] = [_one(row, NOW - 1, amount=row.count - 1)]
        misses["past the window"] = [_one(row, NOW - row.window - 1, amount=row.count)]
        misses["another counter"] = [Occurrence(NOW - 1, 0, SLOWDOWN if row.match != f"metric:{SLOWDOWN}"
                                                else "pcie_replay_count", amount=row.count)]
        return misses
    if row.scope == "different_gpus":
        misses["one GPU fewer"] = _spaced(row, n - 1, gpus=list(range(n - 1)))
        misses["all on one GPU"] = _spaced(row, n + 2)
        misses["past the window"] = [_one(row, NOW - row.window - 1 - i, gpu=i) for i in range(n)]
    else:
        if n > 1:
            misses["one fewer"] = _spaced(row, n - 1)
            misses["split across GPUs"] = _spaced(row, n, gpus=[i % 2 for i in range(n)])  # ceil(n/2) < n
        first_out = NOW - row.window - 1
        misses["the first past the window"] = [_one(row, first_out)] + _spaced(row, n - 1) if n > 1 else \
            [_one(row, first_out)]
    if row.burst and n > 1 and row.scope != "different_gpus":
        misses["all in one burst"] = _spaced(row, n + 3, step=row.burst / (n + 4))
    if row.detail:
        misses["its text does not say it"] = [_one(row, o.t, o.gpu, matching=False) for o in fires(row)]
    if row.scope == "same_link" and n > 1:
        misses["each on another link"] = [_one(row, o.t, o.gpu, link=i) for i, o in enumerate(fires(row))]
    span = row.xids()
    if span is not None:
        other = 31 if span[0] != 31 else 13
        misses["another Xid"] = [Occurrence(o.t, o.gpu, "xid", other, 1.0, o.text) for o in fires(row)]
    if row.match == "class:fatal":
        misses["a fatal burst of a warning Xid"] = [Occurrence(o.t, o.gpu, "xid", 31) for o in fires(row)]
    return misses


def _hits(row: Row, occurrences: list[Occurrence]) -> list[str]:
    return [hit.key for hit in evaluate([row], occurrences, NOW)]


# ---------------------------------------------------------------------- the table


# how a path on this machine or in this repository reads (built so that test_self_contained's scan of the tests
# for paths outside the repository does not take this list for one)
LOCAL_PATH_WORDS = ("/" + "work/", "cor" + "pus", "tests/")


def test_the_table_has_at_least_twenty_sourced_rules_of_every_kind():
    assert len(ROWS) >= 20
    assert {row.kind for row in ROWS} == {"burst", "spread", "decode", "rate"}
    for row in ROWS:
        title, _, address = row.source.partition("<")
        assert title.strip() and address.startswith("http"), row.id
        assert not any(word in row.source for word in LOCAL_PATH_WORDS), row.id  # an original document, not a file
    # what the issue names: 13/31/43 spread and repeated, Xid 74 registers, NVLink5, Xid 154, the three rates
    matches = {(row.match, row.scope) for row in ROWS}
    for xid in (13, 31, 43):
        assert (f"xid:{xid}", "different_gpus") in matches and (f"xid:{xid}", "same_gpu") in matches
    details = {row.detail.partition(":")[0] for row in ROWS}
    assert {"reg0", "reg2", "nvl5", "recovery"} <= details
    assert {"metric:ecc_volatile_corrected", "metric:pcie_replay_count", f"metric:{SLOWDOWN}"} <= \
        {row.match for row in ROWS}
    # InfiniBand (issue 23 item 7): a link flap pages; the other counters have no sourced threshold: shadow
    flap = next(row for row in ROWS if row.match == "metric:link_downed")
    assert (flap.scope, flap.count, flap.severity, flap.shadow) == ("same_port", 1, "warning", False)
    assert all(row.shadow for row in ROWS if row.scope == "same_port" and row is not flap)


def test_spread_means_the_application_and_repeating_on_one_gpu_means_diagnostics():
    by_id = {row.id: row for row in ROWS}
    for xid in (13, 31, 43):
        spread = by_id[f"xid{xid}_different_gpus"]
        assert (spread.action, spread.impact) == ("restart_app", "none")
        assert by_id[f"xid{xid}_same_gpu"].action == "run_diagnostics"
    recovery = {row.detail: row.action for row in ROWS if row.detail.startswith("recovery:")}
    assert recovery["recovery:Node Reboot Required"] == "reboot"
    assert recovery["recovery:GPU Reset Required"] == "reset_gpu"
    assert recovery["recovery:Drain and Reset"] == "drain_then_reset"


@pytest.mark.parametrize(("field", "value", "why"), [
    ("source", "NVSentinel docs", "names its source"),
    ("source", "", "names its source"),
    ("why", " ", "says why"),
    ("action", "pray", "action must be one of"),
    ("scope", "rack", "scope must be one of"),
    ("match", "xid:abc", "match 'xid:abc'"),
    ("detail", "reg0:40", "register bits are numbers 0-31"),
    ("detail", "colour:red", "detail 'colour:red'"),
    ("window", "soon", "is not a duration"),
    ("count", "0", "count must be >= 1"),
    ("shadow", "maybe", "shadow must be yes or no"),
    ("scope", "same_port", "a port counter is counted per port"),
])
def test_a_bad_row_is_refused_naming_the_table_and_the_row(field, value, why):
    from gpuhealth.knowledge import table_rows

    raw = table_rows("correlations.csv")[1]
    raw[field] = value
    with pytest.raises(ValueError, match=why) as caught:
        load_rows([raw])
    assert str(caught.value).startswith(f"correlations.csv: {raw['id']}: ")


def test_two_rows_with_one_id_are_refused():
    from gpuhealth.knowledge import table_rows

    raw = table_rows("correlations.csv")[0]
    with pytest.raises(ValueError, match="unique"):
        load_rows([raw, dict(raw)])


# ---------------------------------------------------------------------- every row: fires, and its near misses do not


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_each_row_fires_on_its_trace(row):
    keys = _hits(row, fires(row))
    assert len(keys) == 1 and keys[0].startswith(row.id)
    if row.scope == "same_link":
        assert keys[0] == f"{row.id}/link3"
    if row.scope == "same_port":
        assert keys[0] == f"{row.id}/mlx5_0/1"


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_each_row_stays_quiet_on_its_near_misses(row):
    misses = near_misses(row)
    assert misses  # every row has at least one
    for name, occurrences in misses.items():
        assert _hits(row, occurrences) == [], f"{row.id}: {name}"


# ---------------------------------------------------------------------- decoding the kernel text


def _lines() -> list[tuple[str, dict]]:
    out = []
    for line in LINES.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            text, _, fields = line.partition("\t")
            out.append((text, json.loads(fields)))
    return out


@pytest.mark.parametrize(("line", "fields"), _lines())
def test_decode_reads_the_documented_fields_of_each_line(line, fields):
    head, _, rest = line.partition("): ")
    code, _, text = rest.partition(", ")
    assert decode(int(code), text) == fields


def test_the_decode_rows_fire_on_the_lines_that_say_so():
    lines = {text: fields for text, fields in _lines()}
    by_id = {row.id: row for row in ROWS}

    def occurrences(fragment: str, times: int = 1) -> list[Occurrence]:
        line = next(text for text in lines if fragment in text)
        code, _, text = line.partition("): ")[2].partition(", ")
        return [Occurrence(NOW - i * 600, 0, "xid", int(code), 1.0, text) for i in range(times)]  # bursts apart

    assert _hits(by_id["xid74_reg0_ecc_parity"], occurrences("link 5(0x10,", 3)) == ["xid74_reg0_ecc_parity/link5"]
    assert _hits(by_id["xid74_reg0_ecc_parity"], occurrences("link 5(0x10,", 2)) == []  # more than 2 times
    assert _hits(by_id["xid74_reg0_signal_integrity"], occurrences("0x600000")) == ["xid74_reg0_signal_integrity"]
    assert _hits(by_id["xid74_reg0_signal_integrity"], occurrences("link 5(0x10,")) == []
    assert _hits(by_id["xid74_reg2_bit13"], occurrences("0x2047")) == ["xid74_reg2_bit13"]
    assert _hits(by_id["xid74_reg2_ecc_parity"], occurrences("0x2047", 3)) == ["xid74_reg2_ecc_parity/link2"]
    assert _hits(by_id["nvl5_fatal_same_link"], occurrences("NETIR_LINK_EVT Fatal", 2)) == \
        ["nvl5_fatal_same_link/link8"]
    assert _hits(by_id["nvl5_fatal_same_link"], occurrences("RLW_REMAP Nonfatal", 2)) == []
    assert _hits(by_id["xid154_node_reboot"], occurrences("(Node Reboot Required)")) == ["xid154_node_reboot"]
    assert _hits(by_id["xid154_node_reboot"], occurrences("0x2 (Node Reboot Required) to 0x0")) == []  # cleared
    assert _hits(by_id["xid154_gpu_reset"], occurrences("(GPU Reset Required)")) == ["xid154_gpu_reset"]
    assert _hits(by_id["xid74_reg0_hardware"], occurrences("link training failed", 5)) == []  # no registers


def test_an_xid_event_whose_text_is_not_text_keeps_its_code_and_loses_the_text():
    clean, refused = sane(XidEvent(T0, 0, 74, text=12345))  # type: ignore[arg-type]
    assert clean == XidEvent(T0, 0, 74) and refused == ("text",)
    assert sane(XidEvent(T0, 0, 74, text="NVLink: ..."))[1] == ()


# ---------------------------------------------------------------------- the monitor: notify, record, shadow


class _Got:
    every_alert = False

    def __init__(self) -> None:
        self.got: list = []

    def send(self, alert) -> None:
        self.got.append(alert)

    def close(self) -> None:
        pass


def _run(events, tmp_path: Path, shadow: bool = False, rows=ROWS, boot: str | None = None):
    trace = tmp_path / "trace.jsonl"
    write_trace(trace, sorted(events, key=lambda e: e.t), GENERATED_BY, NOTE)
    got = _Got()
    store = Store(tmp_path / "history.db")
    dispatcher = Dispatcher([got])
    if boot is not None:  # as `monitor` runs with a history: what paged in this boot is remembered
        from gpuhealth.monitor.boots import FaultMemory

        dispatcher.memory = FaultMemory(store, boot, lambda text: None)
    correlator = Correlator(rows, every_s=10.0, shadow_all=shadow, store=store)
    monitor = Monitor(ReplaySource(trace, speed=0, rebase=False), RuleSet([]), dispatcher, store,
                      interval=0.01, correlator=correlator)
    while not monitor.source.exhausted:
        monitor.step()
    store.close()
    return got.got, Store(tmp_path / "history.db")


def _busy(gpus=(0, 1, 2), n: int = 40) -> list[Sample]:
    return [Sample(T0 + i, gpu, temperature_c=50.0) for gpu in gpus for i in range(n)]


def test_xid31_on_different_gpus_pages_the_application_with_its_action_and_is_recorded(tmp_path):
    events = _busy() + [XidEvent(T0 + 5, 0, 31, "MMU Fault: ENGINE GRAPHICS"), XidEvent(T0 + 6, 2, 31)]
    got, store = _run(events, tmp_path)
    firing = [a for a in got if a.rule == "correlate" and a.state == "firing"]
    assert [a.key for a in firing] == ["xid31_different_gpus"]
    alert = firing[0]
    assert alert.gpu is None and "GPUs 0, 2" in alert.message and actions_of(alert) == ("restart_app", "none")
    assert alert.severity == "info"
    recorded = store.correlations()
    assert [(r[1], r[3], r[4]) for r in recorded] == [("xid31_different_gpus", False, "restart_app")]


def test_xid154_in_a_replayed_trace_pages_a_reboot(tmp_path):
    text = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    got, _store = _run(_busy() + [XidEvent(T0 + 20, 1, 79), XidEvent(T0 + 21, 1, 154, text)], tmp_path)
    firing = [a for a in got if a.rule == "correlate" and a.state == "firing"]
    assert [(a.key, a.gpu, a.action, a.impact, a.severity) for a in firing] == [
        ("xid154_node_reboot", 1, "reboot", "node_unusable", "critical")]


def test_a_correlated_alert_pages_once_per_boot_across_a_restart_of_the_monitor(tmp_path):
    boot = "0f3a2c1e-8d4b-4a9e-9c51-2b7d6e8f0a13"
    text = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    events = _busy() + [XidEvent(T0 + 5, 0, 154, text)]
    first, _store = _run(events, tmp_path, boot=boot)
    first = [a for a in first if a.rule == "correlate"]
    assert [(a.key, a.severity) for a in first] == [("xid154_gpu_reset", "critical")]
    again, store = _run(events, tmp_path, boot=boot)  # gpuhealth restarted, same boot, same events seen again
    (note,) = [a for a in again if a.rule == "correlate" and a.state == "firing"]
    assert "paged already in this boot" in note.message and note.severity == "info"  # said, not paged
    assert "paged already" not in first[0].message
    assert len(store.correlations()) == 2  # evaluated and recorded both times, paged once


def test_a_shadow_row_records_in_the_history_and_notifies_nothing(tmp_path):
    shadow_row = next(row for row in ROWS if row.id == "xid43_same_gpu")
    assert shadow_row.shadow
    events = _busy() + [XidEvent(T0 + 1 + 20 * i, 0, 43) for i in range(3)]  # 3 bursts on GPU 0
    got, store = _run(events, tmp_path, rows=(shadow_row,))
    assert got == []
    assert [(r[1], r[2], r[3]) for r in store.correlations()] == [("xid43_same_gpu", 0, True)]


def test_correlation_shadow_records_every_rule_and_notifies_nothing(tmp_path):
    events = _busy() + [XidEvent(T0 + 5, 0, 31), XidEvent(T0 + 6, 2, 31)]
    got, store = _run(events, tmp_path, shadow=True)
    assert [a for a in got if a.rule == "correlate"] == []
    assert [(r[1], r[3]) for r in store.correlations()] == [("xid31_different_gpus", True)]


def test_the_counter_rows_read_samples_rises_and_slowdown_starts():
    correlator = Correlator(ROWS, every_s=0.0)
    # PCIe replays: 0, then 5 and 5 more within a minute (10 > 8); a counter that falls (driver reload) is no rise
    correlator.feed([Sample(T0, 0, pcie_replay_count=100), Sample(T0 + 20, 0, pcie_replay_count=105),
                     Sample(T0 + 40, 0, pcie_replay_count=110), Sample(T0 + 41, 1, pcie_replay_count=50),
                     Sample(T0 + 42, 1, pcie_replay_count=0)])
    alerts = correlator.step(T0 + 42)
    assert [(a.key, a.gpu) for a in alerts] == [("pcie_replay_rate", 0)]
    # hardware slowdown switched on 6 times in 10 min on GPU 1; held on for a long time on GPU 2 (one start)
    flips = [Sample(T0 + 100 + i * 30, 1, clock_event_reasons=0x40 if i % 2 == 0 else 0) for i in range(12)]
    held = [Sample(T0 + 100 + i * 10, 2, clock_event_reasons=0x8) for i in range(60)]
    correlator.feed(flips + held)
    alerts = correlator.step(T0 + 500)
    assert ("slowdown_event_rate", 1) in [(a.key, a.gpu) for a in alerts]
    assert ("slowdown_event_rate", 2) not in [(a.key, a.gpu) for a in alerts]


def test_evaluation_runs_at_its_cadence_and_an_alert_resolves_when_its_window_has_passed():
    row = next(row for row in ROWS if row.id == "xid154_gpu_reset")
    correlator = Correlator((row,), every_s=30.0)
    correlator.feed([XidEvent(T0, 0, 154, "recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")])
    first = correlator.step(T0)
    assert [(a.key, a.state) for a in first] == [("xid154_gpu_reset", "firing")]
    assert correlator.step(T0 + 10) == []  # not due yet
    assert correlator.step(T0 + 40) == []  # due, still holds: nothing new
    resolved = correlator.step(T0 + row.window + 60)
    assert [(a.key, a.state) for a in resolved] == [("xid154_gpu_reset", "resolved")]


def test_the_occurrences_kept_are_bounded():
    from gpuhealth.monitor import correlate

    correlator = Correlator(ROWS, every_s=3600.0)
    # seconds apart: identical Xids closer than COALESCE_S are one occurrence (the next test)
    correlator.feed(XidEvent(T0 + i * 1.5, 0, 13) for i in range(correlate.MAX_OCCURRENCES + 500))
    assert len(correlator._occurrences) == correlate.MAX_OCCURRENCES


@pytest.mark.parametrize(("line", "fields"), _lines())
def test_an_occurrence_keeps_only_the_decoded_part_of_a_long_kernel_text(line, fields):
    from gpuhealth.monitor import correlate

    code, _, text = line.partition("): ")[2].partition(", ")
    long_text = "x" * 4000 + " " + text + " " + "y" * 4000  # a kernel record may be 8 KiB
    correlator = Correlator(ROWS)
    correlator.feed([XidEvent(T0, 0, int(code), long_text)])
    (kept,) = correlator._occurrences
    assert len(kept.text) <= correlate.MAX_DECODED and decode(int(code), kept.text) == fields


def test_a_code_only_xid_takes_the_decoded_part_of_its_logged_line():
    line = next(text for text, _ in _lines() if "link 5(0x10," in text)
    text = line.partition("): ")[2].partition(", ")[2]
    correlator = Correlator(ROWS)
    correlator.feed([XidEvent(T0, 0, 74)])  # NVML: the code only
    assert correlator.feed_log([(T0 + 2, 0, 74, "z" * 5000 + text)]) == 0  # the same Xid, not counted twice
    (kept,) = correlator._occurrences
    assert kept.text == "link 5(0x10, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)" and decode(74, kept.text)["reg0"] == 0x10


def test_an_xid_storm_is_one_occurrence_a_second_that_counts_every_xid():
    by_id = {row.id: row for row in ROWS}
    link5 = next(text for text, _ in _lines() if "link 5(0x10," in text).partition("): ")[2].partition(", ")[2]
    correlator = Correlator(ROWS, every_s=0.0)
    # three identical Xid 74 within one second (a count row, no burst): one occurrence standing for three
    correlator.feed([XidEvent(NOW - 0.5 + i * 0.1, 0, 74, link5) for i in range(3)])
    assert [o.amount for o in correlator._occurrences] == [3.0]
    assert _hits(by_id["xid74_reg0_ecc_parity"], list(correlator._occurrences)) == ["xid74_reg0_ecc_parity/link5"]
    # a thousand Xid 13 in one second are one burst (count 2 needs two bursts 15 s apart) ...
    storm = Correlator(ROWS, every_s=0.0)
    storm.feed([XidEvent(NOW - 30 + i * 0.001, 0, 13) for i in range(1000)])
    assert len(storm._occurrences) == 1 and _hits(by_id["xid13_same_gpu"], list(storm._occurrences)) == []
    # ... and another burst 20 s later makes two; another GPU's Xid is its own occurrence
    storm.feed([XidEvent(NOW - 10 + i * 0.001, 0, 13) for i in range(1000)] + [XidEvent(NOW - 10, 1, 13)])
    assert len(storm._occurrences) == 3 and _hits(by_id["xid13_same_gpu"], list(storm._occurrences)) == \
        ["xid13_same_gpu"]


def test_the_config_keys_and_their_bounds():
    options = load_config()["monitor"]
    assert options["correlate_every"] == "10s" and options["correlation_shadow"] is False
    correlator = from_config(options)
    assert correlator.every_s == 10.0 and len(correlator.rows) == len(ROWS) and not correlator.shadow_all
    assert from_config({**options, "correlate_every": 0}).rows == ()  # 0: off
    assert check_duration("monitor.correlate_every", 0) == 0.0
    with pytest.raises(ValueError, match="out of range"):
        check_duration("monitor.correlate_every", "0.5s")
    with pytest.raises(ValueError, match="true or false"):
        from_config({**options, "correlation_shadow": "yes"})


def test_docs_correlations_md_is_current():
    page = ROOT / "docs" / "correlations.md"
    assert page.exists() and page.read_text(encoding="utf-8") == markdown(ROWS), \
        "docs/correlations.md is stale: run `make docs`"
