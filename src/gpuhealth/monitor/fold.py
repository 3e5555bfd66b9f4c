"""One page per fault: a derived alert folds into the primary alert of the same fault.

Some faults raise several alerts in gpuhealth's own rules. A GPU that falls off the bus is NVML's ``xid`` 79 at
once (the driver's own report of the fault, with its code and meaning), ``gpu_lost`` when the next poll of that GPU
fails (the consequence), ``gpu_count`` on the host 30 s later, and the full check's ``check:GH302`` when it next
reads the kernel log. Any other Xid that NVML's events report (``xid``) reaches the kernel log too, where the
periodic full check finds it again (``check:GH301``). Through Prometheus, Alertmanager's ``inhibit_rules`` keep
these to one page (deploy/alertmanager/alertmanager.yml). For the monitor's own notifiers (stderr, log file,
webhook) this module is the same rule, in one place:

- a derived alert folds when every thing it stands on (``Alert.about``: a ``Basis``) is explained by an alert of
  one of its primary rules (``FOLDS``) that is open and at least as severe: the GPU a lost GPU's count misses, the
  Xid 79 of a lost GPU, the Xid codes of a full check's finding. A primary that is itself folded passes the fault
  on to the alert it was folded into (gpu_count -> gpu_lost -> xid 79: one page, the Xid's);
- a folded alert is not sent as an alert of its own: the primary alert is sent again with it in its message
  ("... also <derived>: <text> - the same fault, folded into this alert"), so it is never dropped silently;
- it stays folded until it resolves (its resolution says it was folded), unless it comes again standing on
  something no primary explains (another GPU missing, another Xid code): then it is sent on its own.
  A second, different failure therefore still pages;
- a primary that resolved still explains what the kernel log showed before it resolved: the full check keeps
  finding an Xid in the log until the reboot, long after NVML's alert resolved (``quiet_for`` without a repeat).
  Such a finding is not a new page: it is sent at ``info`` severity, saying which alert paged it. Only a line
  logged after that alert resolved (``Basis.seen``, from the finding's ``last_seen``) makes it page again; a
  finding without wall-clock times cannot show that and pages as before.

The primary's window is its open alert: ``gpu_lost`` until the GPU answers again, ``xid`` until ``quiet_for``
without that Xid. Nothing here decides whether a fault exists: only how many pages it makes.
"""

from __future__ import annotations

from typing import Any

from .rules import SEVERITIES, Alert, Basis

# derived rule -> the alerts that explain one thing it stands on: (primary rule, that alert's key; None: the
# Basis's own key). Xid 79 is the primary of a lost GPU: it comes first and says what happened (fallen off the
# bus); gpu_lost, the count and GH302 are its consequences. A lost GPU without an Xid 79 (a hung NVML call, the
# nvidia-smi source, which reports no Xids) is its own primary.
FOLDS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "gpu_lost": (("xid", "79"),),
    "gpu_count": (("gpu_lost", ""), ("xid", "79")),
    "check:GH301": (("xid", None),),
    "check:GH302": (("gpu_lost", ""), ("xid", "79")),
}

Identity = tuple[str, int | None, str]


def finding_about(finding: Any) -> tuple[Basis, ...]:
    """What a full check's finding stands on, in the keys of the alert that would explain it (its labels, never
    its message)."""
    gpu = finding.subject.gpu_index
    if gpu is None:
        return ()
    severity = finding.severity.value
    if finding.code == "GH301" and "xid" in finding.labels:
        return (Basis(gpu, finding.labels["xid"], severity, finding.last_seen),)
    if finding.code == "GH302":
        return (Basis(gpu, "", severity, finding.last_seen),)
    return ()


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


class Folding:
    """The folding state of one Dispatcher: what is open, what resolved, and what was folded into what."""

    def __init__(self) -> None:
        self._open: dict[Identity, Alert] = {}  # firing alerts as last sent (folded ones too: they pass a fault on)
        self._resolved: dict[Identity, tuple[str, float]] = {}  # alerts that resolved: (severity, when)
        # derived -> (the primary it was folded into, what it stood on then)
        self._folded: dict[Identity, tuple[Identity, tuple[Basis, ...]]] = {}

    def open_alerts(self) -> list[Alert]:
        return list(self._open.values())

    def _bases(self, alert: Alert) -> tuple[Basis, ...]:
        if alert.about:
            return alert.about
        return (Basis(alert.gpu),) if alert.gpu is not None else ()  # gpu_lost stands on its own GPU

    def _root(self, identity: Identity) -> Alert:
        """The alert a fault is paged under: the last open one along the chain of alerts folded into others."""
        best = identity
        seen = {identity}
        while identity in self._folded:
            identity = self._folded[identity][0]
            if identity in seen:  # cannot happen with FOLDS as it is; a loop must not hang the monitor
                break
            seen.add(identity)
            if identity in self._open:
                best = identity
        return self._open[best]

    def _explained(self, alert: Alert, basis: Basis) -> Alert | Identity | None:
        """The open alert (its root) that explains ``basis``; else a resolved primary's identity that paged it
        before (the kernel log shows nothing newer than its resolution); else None."""
        severity = basis.severity or alert.severity
        earlier: Identity | None = None
        for rule, key in FOLDS.get(alert.rule, ()):
            identity = (rule, basis.gpu, basis.key if key is None else key)
            if identity == alert.identity:
                continue
            open_ = self._open.get(identity)
            if open_ is not None and _rank(open_.severity) >= _rank(severity):
                return self._root(identity)
            resolved = self._resolved.get(identity)
            if (open_ is None and resolved is not None and basis.seen is not None and basis.seen <= resolved[1]
                    and _rank(resolved[0]) >= _rank(severity)):
                earlier = identity
        return earlier

    def primary(self, alert: Alert) -> Alert | Identity | None:
        """What explains ``alert`` (firing): the most severe open primary alert when one explains any of it, else
        the identity of a resolved one that paged all of it already; None when something it stands on is
        explained by nothing (then it pages)."""
        bases = self._bases(alert)
        if alert.rule not in FOLDS or not bases or alert.state != "firing":
            return None
        found: list[Alert] = []
        earlier: Identity | None = None
        for basis in bases:
            explained = self._explained(alert, basis)
            if explained is None:
                return None
            if isinstance(explained, Alert):
                found.append(explained)
            else:
                earlier = earlier or explained
        if found:
            return max(found, key=lambda a: _rank(a.severity))
        return earlier

    def again(self, alert: Alert) -> Alert | None:
        """A folded alert that comes again unchanged in state (each full check repeats its findings): the
        alert to send when it now stands on something no primary explains, else None."""
        folded = self._folded.get(alert.identity)
        if folded is None or alert.state != "firing" or alert.about == folded[1]:
            return None
        primary = self.primary(alert)
        if primary is not None:
            self._folded[alert.identity] = (primary.identity if isinstance(primary, Alert) else primary, alert.about)
            return None
        return alert  # route() unfolds it

    def route(self, alert: Alert) -> Alert:
        """What the monitor's notifiers get for ``alert``: itself, or the fold's note on its primary."""
        identity = alert.identity
        if alert.state == "resolved":
            self._open.pop(identity, None)
            self._resolved[identity] = (alert.severity, alert.t)
            folded = self._folded.pop(identity, None)
            if folded is None:
                return alert
            return _with(alert, f"{alert.message} (it was folded into {_name(folded[0])}: the same fault)")
        self._resolved.pop(identity, None)
        self._open[identity] = alert
        primary = self.primary(alert)
        if primary is None:
            self._folded.pop(identity, None)
            return alert
        if not isinstance(primary, Alert):  # paged already, and resolved since: said, not paged again
            self._folded[identity] = (primary, alert.about)
            note = (f"{alert.message} (the same fault as {_name(primary)}, which paged and resolved; the kernel log "
                    "shows no newer occurrence - not paged again)")
            return Alert(alert.rule, alert.gpu, "info", "firing", note, alert.t, alert.key, alert.renotify,
                         alert.about, alert.action, alert.impact)
        self._folded[identity] = (primary.identity, alert.about)
        note = (f"{primary.message} (also {_name(identity)}: {alert.message} - the same fault, folded into "
                "this alert)")
        return Alert(primary.rule, primary.gpu, primary.severity, "firing", note, alert.t, primary.key,
                     renotify=True, about=primary.about, action=primary.action, impact=primary.impact)


def _name(identity: Identity) -> str:
    """An alert in a note: "gpu_count on the host", "xid[48] on GPU 0", "the full check's GH301 on GPU 0" (a
    check alert's key is an internal one: not shown)."""
    rule, gpu, key = identity
    where = "the host" if gpu is None else f"GPU {gpu}"
    if rule.startswith("check:"):
        return f"the full check's {rule.removeprefix('check:')} on {where}"
    return f"{rule}{f'[{key}]' if key else ''} on {where}"


def _with(alert: Alert, message: str) -> Alert:
    return Alert(alert.rule, alert.gpu, alert.severity, alert.state, message, alert.t, alert.key, alert.renotify,
                 alert.about, alert.action, alert.impact)


def xid_series(alert: Alert) -> list[tuple[str, str]]:
    """(Xid code, severity) of each series ``alert`` has on /metrics, so that Alertmanager can compare codes: an
    ``xid`` alert's code; a full check's finding one series per Xid code it stands on, each at that Xid's own
    severity (a warning Xid 94 beside a critical Xid 48 on one GPU stays a warning); ("", severity) for the rest.
    One series per GPU and Xid code seen: the label never holds text."""
    if alert.rule == "xid":
        return [(alert.key, alert.severity)]
    if ("xid", None) in FOLDS.get(alert.rule, ()) and alert.about:
        return list(dict.fromkeys((basis.key, basis.severity or alert.severity) for basis in alert.about))
    return [("", alert.severity)]
