"""One page per fault: a derived alert folds into the primary alert of the same fault.

Some faults raise two alerts in gpuhealth's own rules. A lost GPU is ``gpu_lost`` on that GPU and, 30 s later,
``gpu_count`` on the host; an Xid that NVML's events report (``xid``) reaches the kernel log too, where the
periodic full check finds it again (``check:GH301``); a GPU that fell off the bus (``check:GH302``) is the
GPU that ``gpu_lost`` already reports. Through Prometheus, Alertmanager's ``inhibit_rules`` keep these to one
page (deploy/alertmanager/alertmanager.yml). For the monitor's own notifiers (stderr, log file, webhook)
this module is the same rule, in one place:

- a derived alert folds when every (GPU, key) it stands on (``Alert.about``) has an open alert of its
  primary rule, at least as severe: the GPU it names for the host's count, the Xid codes of the finding;
- a folded alert is not sent as an alert of its own: the primary alert is sent again with it in its message
  ("... also <derived>: <text> - the same fault, folded into this alert"), so it is never dropped silently;
- it stays folded until it resolves (its resolution says it was folded), unless it comes again standing on
  something no open primary explains (another GPU missing, another Xid code): then it is sent on its own.
  A second, different failure therefore still pages.

The primary's window is its open alert: ``gpu_lost`` until the GPU answers again, ``xid`` until
``quiet_for`` without that Xid. Nothing here decides whether a fault exists: only how many pages it makes.
"""

from __future__ import annotations

import re
from typing import Any

from .rules import SEVERITIES, Alert

# derived rule -> the rule whose open alerts explain it
FOLDS: dict[str, str] = {"gpu_count": "gpu_lost", "check:GH301": "xid", "check:GH302": "gpu_lost"}
# Xid's GH301 message starts "Xid <code>" (checks/kernel_log.py, one finding per GPU and code)
_XID_MESSAGE = re.compile(r"Xid (\d{1,4})\b")

Identity = tuple[str, int | None, str]


def finding_about(finding: Any) -> tuple[tuple[int | None, str], ...]:
    """What a full check's finding stands on, in the keys of the alert that would explain it."""
    gpu = finding.subject.gpu_index
    if gpu is None:
        return ()
    if finding.code == "GH301":
        match = _XID_MESSAGE.match(finding.message)
        return ((gpu, match.group(1)),) if match else ()
    if finding.code == "GH302":
        return ((gpu, ""),)
    return ()


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


class Folding:
    """The folding state of one Dispatcher: what is open, and what was folded into what."""

    def __init__(self) -> None:
        self._open: dict[Identity, Alert] = {}  # firing alerts, as last sent
        # derived -> (the primary it was folded into, what it stood on then)
        self._folded: dict[Identity, tuple[Identity, tuple[tuple[int | None, str], ...]]] = {}

    def primary(self, alert: Alert) -> Alert | None:
        """The open primary alert that explains ``alert`` (firing), the most severe one; None if none does."""
        rule = FOLDS.get(alert.rule)
        if rule is None or not alert.about or alert.state != "firing":
            return None
        found: list[Alert] = []
        for gpu, key in alert.about:
            open_ = self._open.get((rule, gpu, key))
            if open_ is None:
                return None
            found.append(open_)
        best = max(found, key=lambda a: _rank(a.severity))
        return best if _rank(best.severity) >= _rank(alert.severity) else None

    def again(self, alert: Alert) -> Alert | None:
        """A folded alert that comes again unchanged in state (each full check repeats its findings): the
        alert to send when it now stands on something no open primary explains, else None."""
        folded = self._folded.get(alert.identity)
        if folded is None or alert.state != "firing" or alert.about == folded[1]:
            return None
        primary = self.primary(alert)
        if primary is not None:
            self._folded[alert.identity] = (primary.identity, alert.about)
            return None
        return alert  # route() unfolds it

    def route(self, alert: Alert) -> Alert:
        """What the monitor's notifiers get for ``alert``: itself, or the fold's note on its primary."""
        identity = alert.identity
        if alert.state == "resolved":
            self._open.pop(identity, None)
            folded = self._folded.pop(identity, None)
            if folded is None:
                return alert
            return _with(alert, f"{alert.message} (it was folded into {_name(folded[0])}: the same fault)")
        primary = self.primary(alert)
        if primary is None:
            self._folded.pop(identity, None)
            self._open[identity] = alert
            return alert
        self._folded[identity] = (primary.identity, alert.about)
        note = (f"{primary.message} (also {_name(identity)}: {alert.message} - the same fault, folded into "
                "this alert)")
        return Alert(primary.rule, primary.gpu, primary.severity, "firing", note, alert.t, primary.key,
                     renotify=True, about=primary.about)


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
                 alert.about)
