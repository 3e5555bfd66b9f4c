"""One page per fault (monitor/fold.py): a derived alert of a fault that already paged folds into that alert
for the monitor's notifiers, with its text in the primary's message; a second, different failure still pages;
serve's live state (``every_alert``) gets every alert as it is."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from monitor_fakes import T0

from gpuhealth.monitor.fold import finding_about
from gpuhealth.monitor.notify import Dispatcher, format_line
from gpuhealth.monitor.rules import Alert, Basis, RuleSet
from gpuhealth.monitor.sample import GpuLost, Sample


class Pager:
    """A notifier like the log file: the lines it would write."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.alerts: list[Alert] = []

    def send(self, alert: Alert) -> None:
        self.alerts.append(alert)
        self.lines.append(format_line(alert))

    def close(self) -> None:
        pass


class Everything(Pager):
    every_alert = True


def dispatcher() -> tuple[Dispatcher, Pager, Everything]:
    pager, state = Pager(), Everything()
    return Dispatcher([pager, state]), pager, state


def lost(gpu: int, t: float = T0) -> Alert:
    return Alert("gpu_lost", gpu, "critical", "firing", f"GPU {gpu} lost: GPU is lost", t)


def count(*gpus: int | None, t: float = T0 + 30, renotify: bool = False) -> Alert:
    return Alert("gpu_count", None, "critical", "firing", f"{8 - len(gpus)} GPU(s) answering, 8 expected", t,
                 renotify=renotify, about=tuple(Basis(g) for g in gpus))


def xid(gpu: int, code: int, severity: str = "critical", t: float = T0) -> Alert:
    return Alert("xid", gpu, severity, "firing", f"GPU {gpu} Xid {code}", t, str(code))


def check_xid(gpu: int, *codes: int, severity: str = "critical", t: float = T0 + 600,
              seen: float | None = None) -> Alert:
    """The full check's GH301 alert on ``gpu`` standing on ``codes``, each last logged at ``seen``."""
    return Alert("check:GH301", gpu, severity, "firing", f"Xid {codes[0]}: in the kernel log", t,
                 f"GH301@GPU {gpu}", about=tuple(Basis(gpu, str(c), severity, seen) for c in codes))


def test_a_lost_gpu_pages_once_and_its_count_alert_is_in_that_page():
    d, pager, state = dispatcher()
    d.dispatch([lost(3)])
    d.dispatch([count(3)])
    assert [(a.rule, a.gpu, a.state) for a in pager.alerts] == [("gpu_lost", 3, "firing"), ("gpu_lost", 3, "firing")]
    note = pager.alerts[1]
    assert note.renotify and note.severity == "critical"
    assert note.message.startswith("GPU 3 lost: GPU is lost (also gpu_count on the host: 7 GPU(s) answering")
    assert "the same fault, folded into this alert" in note.message
    # serve's state (and so /metrics, for Alertmanager to inhibit) gets both as they are
    assert [(a.rule, a.message) for a in state.alerts] == [("gpu_lost", lost(3).message),
                                                           ("gpu_count", count(3).message)]
    assert [a.rule for a in d.sent] == ["gpu_lost", "gpu_count"]


def test_another_gpu_vanishing_without_its_own_alert_still_pages():
    d, pager, _ = dispatcher()
    d.dispatch([lost(3)])
    d.dispatch([count(3)])
    d.dispatch([count(3, 5, t=T0 + 90, renotify=True)])  # GPU 5 gone too, with no gpu_lost of its own
    last = pager.alerts[-1]
    assert (last.rule, last.gpu, last.state, last.message) == ("gpu_count", None, "firing", count(3, 5).message)
    assert len(pager.alerts) == 3


def test_a_count_alert_about_a_gpu_never_seen_is_not_folded():
    d, pager, _ = dispatcher()
    d.dispatch([lost(3)])
    d.dispatch([count(3, None)])
    assert [a.rule for a in pager.alerts] == ["gpu_lost", "gpu_count"]


def test_a_gpu_lost_after_the_count_fired_pages_itself():
    d, pager, _ = dispatcher()
    d.dispatch([count(3)])  # the count first (its own page): nothing to fold into
    d.dispatch([lost(3, t=T0 + 40)])
    assert [a.rule for a in pager.alerts] == ["gpu_count", "gpu_lost"]


def test_the_full_checks_xid_folds_into_the_nvml_xid_of_the_same_gpu_and_code():
    d, pager, _ = dispatcher()
    d.dispatch([xid(0, 48)])
    d.dispatch([check_xid(0, 48)])
    assert [(a.rule, a.gpu, a.key) for a in pager.alerts] == [("xid", 0, "48"), ("xid", 0, "48")]
    assert pager.alerts[1].message == ("GPU 0 Xid 48 (also the full check's GH301 on GPU 0: Xid 48: in the kernel "
                                       "log - the same fault, folded into this alert)")


def test_the_full_checks_xid_pages_for_another_gpu_another_code_or_a_worse_severity():
    for open_, found in ((xid(1, 48), check_xid(0, 48)),  # another GPU
                         (xid(0, 13, "warning"), check_xid(0, 48)),  # another Xid on that GPU
                         (xid(0, 13, "warning"), check_xid(0, 13, severity="critical"))):  # graded worse
        d, pager, _ = dispatcher()
        d.dispatch([open_])
        d.dispatch([found])
        assert [a.rule for a in pager.alerts] == ["xid", "check:GH301"], (open_, found)


def test_a_folded_finding_that_later_names_an_unexplained_xid_pages():
    d, pager, _ = dispatcher()
    d.dispatch([xid(0, 48)])
    d.dispatch([check_xid(0, 48)])
    d.dispatch([check_xid(0, 48, t=T0 + 1200)])  # the next full check: the same, nothing sent
    assert len(pager.alerts) == 2
    d.dispatch([check_xid(0, 48, 94, t=T0 + 1800)])  # Xid 94 in the kernel log, which NVML did not report
    assert (pager.alerts[-1].rule, pager.alerts[-1].message) == ("check:GH301", "Xid 48: in the kernel log")
    assert len(pager.alerts) == 3


def test_a_folded_alert_stays_folded_when_its_primary_resolves_and_its_resolution_says_so():
    d, pager, state = dispatcher()
    d.dispatch([xid(0, 48)])
    d.dispatch([check_xid(0, 48)])
    d.dispatch([Alert("xid", 0, "critical", "resolved", "GPU 0 no Xid 48 again", T0 + 3600, "48")])
    d.dispatch([check_xid(0, 48, t=T0 + 4200)])  # still in the kernel log: the fault already paged
    assert [a.state for a in pager.alerts] == ["firing", "firing", "resolved"]
    d.dispatch([Alert("check:GH301", 0, "critical", "resolved", "no longer found", T0 + 9000, "GH301@GPU 0")])
    last = pager.alerts[-1]
    assert (last.rule, last.state) == ("check:GH301", "resolved")
    assert last.message == "no longer found (it was folded into xid[48] on GPU 0: the same fault)"
    assert state.alerts[-1].message == "no longer found"  # the live state: as it is


def test_the_count_rule_names_the_gpus_it_misses_and_says_so_again_when_they_change():
    rules = RuleSet.from_config({"gpu_count": {"for": 30, "clear_for": 30}})

    def poll(t: float, answering: range, lost_gpus: tuple[int, ...] = ()) -> list[Alert]:
        events = [Sample(t, g, uuid=f"GPU-{g}") for g in answering] + [GpuLost(t, g, "GPU is lost") for g in lost_gpus]
        return rules.feed(events)

    assert poll(T0, range(8)) == []
    assert poll(T0 + 10, range(7), (7,)) == []  # not yet: `for` 30 s
    fired = poll(T0 + 40, range(7), (7,))
    assert [(a.state, a.about, a.renotify) for a in fired] == [("firing", (Basis(7),), False)]
    assert poll(T0 + 50, range(7), (7,)) == []  # unchanged: nothing
    again = poll(T0 + 60, range(6), (7,))  # GPU 6 gone as well
    assert [(a.state, a.about, a.renotify) for a in again] == [("firing", (Basis(6), Basis(7)), True)]
    assert "missing: (GPU 6, GPU-6); (GPU 7, GPU-7)" in again[0].message


def test_a_real_gh301_finding_stands_on_its_xid_codes():
    """The h100x8-xid-ecc test host: Xid 48, 63 and 94 on GPU 0; one check:GH301 alert standing on 48 and 94
    (63, a row remapped, is information: no alert)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.collect import collect
    from gpuhealth.monitor.daemon import CheckRunner
    from hostcases import FakeHost, load_spec

    report = run_checks(collect(FakeHost(load_spec("h100x8-xid-ecc"))))
    about = {finding_about(f)[0][:3] for f in report.findings if f.code == "GH301"}
    assert about == {(0, "48", "critical"), (0, "63", "info"), (0, "94", "warning")}
    # when the kernel log last showed each: its own line's time (dmesg --time-format iso), not the message's words
    seen = {b.key: b.seen for f in report.findings if f.code == "GH301" for b in finding_about(f)}
    assert seen["48"] == datetime.datetime(2024, 11, 15, 12, 2, 3, 470068, datetime.timezone.utc).timestamp()
    assert seen["94"] > seen["48"]
    alerts = CheckRunner(600, run=lambda: report, log=lambda _: None)._alerts(report, now=T0)
    gh301 = [a for a in alerts if a.rule == "check:GH301"]
    assert len(gh301) == 1 and {b.key for b in gh301[0].about} == {"48", "94"}
    d, pager, _ = dispatcher()
    d.dispatch([xid(0, 48), xid(0, 94, "warning")])
    d.dispatch(gh301)
    assert [a.rule for a in pager.alerts] == ["xid", "xid", "xid"]  # folded into Xid 48 (the critical one)
    assert pager.alerts[-1].key == "48"


def gh302(gpu: int, t: float = T0 + 600) -> Alert:
    return Alert("check:GH302", gpu, "critical", "firing", f"GPU {gpu} has fallen off the bus", t, f"GH302@GPU {gpu}",
                 about=(Basis(gpu, "", "critical"),))


def test_a_gpu_fallen_off_the_bus_pages_once_under_its_xid_79():
    """Xid 79 comes first and says what happened; the lost GPU, the count and the full check's GH302 are its
    consequences: each is said in a line of the Xid's alert, none pages on its own."""
    d, pager, state = dispatcher()
    d.dispatch([xid(1, 79)])
    d.dispatch([lost(1, t=T0 + 1)])
    d.dispatch([count(1)])
    d.dispatch([gh302(1)])
    assert [(a.rule, a.gpu, a.key, a.severity) for a in pager.alerts] == [("xid", 1, "79", "critical")] * 4
    notes = [a.message for a in pager.alerts[1:]]
    assert notes[0] == ("GPU 1 Xid 79 (also gpu_lost on GPU 1: GPU 1 lost: GPU is lost - the same fault, folded "
                        "into this alert)")
    assert notes[1].startswith("GPU 1 Xid 79 (also gpu_count on the host: 7 GPU(s) answering")
    assert notes[2].startswith("GPU 1 Xid 79 (also the full check's GH302 on GPU 1: GPU 1 has fallen off the bus")
    assert [a.rule for a in state.alerts] == ["xid", "gpu_lost", "gpu_count", "check:GH302"]  # /metrics: all
    # the lost GPU's resolution (it answers again) says where it was paged
    d.dispatch([Alert("gpu_lost", 1, "critical", "resolved", "GPU 1 answering again after 5 min", T0 + 300)])
    assert pager.alerts[-1].message.endswith("(it was folded into xid[79] on GPU 1: the same fault)")


def test_a_lost_gpu_pages_when_the_xid_79_is_another_gpus_or_none():
    for open_ in ([xid(0, 79)], [xid(1, 13, "warning")], []):
        d, pager, _ = dispatcher()
        d.dispatch(open_)
        d.dispatch([lost(1, t=T0 + 1)])
        assert [a.rule for a in pager.alerts] == [a.rule for a in open_] + ["gpu_lost"], open_


def test_the_count_folds_into_the_xid_79_when_the_gpu_vanished_without_a_lost_alert():
    d, pager, _ = dispatcher()
    d.dispatch([xid(2, 79)])
    d.dispatch([count(2)])
    assert [(a.rule, a.key) for a in pager.alerts] == [("xid", "79"), ("xid", "79")]


def resolved_xid(gpu: int, code: int, t: float) -> Alert:
    return Alert("xid", gpu, "critical", "resolved", f"GPU {gpu} no Xid {code} again", t, str(code))


def test_an_xid_the_full_check_first_finds_after_its_nvml_alert_resolved_is_not_paged_again():
    """NVML's Xid alert resolves after an hour without a repeat; the kernel log keeps the line until the reboot.
    The check's finding of it, last logged before that resolution, is said at info severity, not paged."""
    d, pager, _ = dispatcher()
    d.dispatch([xid(0, 48)])
    d.dispatch([resolved_xid(0, 48, T0 + 3600)])
    d.dispatch([check_xid(0, 48, t=T0 + 4200, seen=T0 - 1)])  # the line NVML reported, a second before
    last = pager.alerts[-1]
    assert (last.rule, last.severity, last.state) == ("check:GH301", "info", "firing")
    assert last.message == ("Xid 48: in the kernel log (the same fault as xid[48] on GPU 0, which paged and "
                            "resolved; the kernel log shows no newer occurrence - not paged again)")
    d.dispatch([check_xid(0, 48, t=T0 + 4800, seen=T0 - 1)])  # the next full check: nothing
    assert len(pager.alerts) == 3
    # a line logged after the alert resolved, which NVML did not report: a new occurrence, it pages
    d.dispatch([check_xid(0, 48, t=T0 + 5400, seen=T0 + 5000)])
    last = pager.alerts[-1]
    assert (last.rule, last.severity, last.message) == ("check:GH301", "critical", "Xid 48: in the kernel log")


def test_a_finding_after_the_resolution_pages_when_it_is_newer_or_its_time_unknown():
    for seen in (T0 + 3700, None):
        d, pager, _ = dispatcher()
        d.dispatch([xid(0, 48)])
        d.dispatch([resolved_xid(0, 48, T0 + 3600)])
        d.dispatch([check_xid(0, 48, t=T0 + 4200, seen=seen)])
        assert (pager.alerts[-1].rule, pager.alerts[-1].severity) == ("check:GH301", "critical"), seen


def test_a_folded_finding_that_grows_by_an_xid_nvml_reported_stays_folded_after_the_first_resolved():
    d, pager, _ = dispatcher()
    d.dispatch([xid(0, 48)])
    d.dispatch([check_xid(0, 48, t=T0 + 600, seen=T0)])
    d.dispatch([resolved_xid(0, 48, T0 + 3600)])
    d.dispatch([xid(0, 94, "warning", t=T0 + 4000)])  # a new Xid 94: its own page
    grown = Alert("check:GH301", 0, "critical", "firing", "Xid 48: in the kernel log", T0 + 4200, "GH301@GPU 0",
                  about=(Basis(0, "48", "critical", T0), Basis(0, "94", "warning", T0 + 3999)))
    d.dispatch([grown])
    assert [(a.rule, a.key) for a in pager.alerts] == [("xid", "48"), ("xid", "48"), ("xid", "48"), ("xid", "94")]
