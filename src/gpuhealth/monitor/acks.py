"""Acknowledgements: an operator says "I know" about a fault, and it stops paging until a time or until cleared.

``gpuhealth ack CODE [--gpu N] [--until TIME] --reason TEXT`` (and serve's ``POST /api/v1/ack``, token required)
writes a row to the history database; ``ack --list`` shows them, ``ack --clear CODE`` removes one. CODE is:

- a check code (``GH302``): the full check's finding, ``check:GH302``;
- ``xid:<code>`` (``xid:79``): the xid rule's alert for that Xid and a full check's Xid finding standing only on it;
- a rule (``temperature``) or a rule and its key (``ecc:ecc_volatile_corrected``).

An acknowledged alert is never hidden: it fires, resolves and shows as it would (the dashboard, ``/metrics``
``gpuhealth_alert_acknowledged``, ``fleet``); only the page is held back (the monitor's notifiers get it at info,
saying it is acknowledged and why). When the acknowledgement ends (``--until`` passes, or it is cleared) while the
alert still fires, it pages then. An acknowledgement never resolves anything: a sticky fault (retired pages or
remapped rows pending, a GPU that needs a reset) resolves only when the GPU's own state says it is gone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

from .rules import RULES, Alert

_CHECK = lazy_re(r"GH\d{3}")
_KEY = lazy_re(r"[A-Za-z0-9_.-]{1,64}")
MAX_REASON = 500


@record
class Ack:
    code: str
    gpu: int | None  # None: every GPU and the host
    until: float | None  # None: until cleared
    reason: str
    t: float  # when it was given

    def active(self, now: float) -> bool:
        return self.until is None or now < self.until

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "gpu": self.gpu, "until": self.until, "reason": self.reason, "t": self.t}


def normalize(code: str) -> str:
    """CODE as stored; ValueError saying what is accepted."""
    text = code.strip()
    if _CHECK.fullmatch(text.upper()):
        return text.upper()
    rule, _, key = text.partition(":")
    if rule == "xid" and key.isdecimal():
        return f"xid:{int(key)}"
    if rule in RULES and (not key or _KEY.fullmatch(key)):
        return text
    raise ValueError(f"{code!r} is no check code (GH302), Xid (xid:79) or rule ({', '.join(sorted(RULES))}, "
                     "optionally rule:key)")


def covers(ack: Ack, alert: Alert) -> bool:
    """Whether ``ack`` is about ``alert`` (whatever its time)."""
    if ack.gpu is not None and alert.gpu != ack.gpu:
        return False
    if _CHECK.fullmatch(ack.code):
        return alert.rule == f"check:{ack.code}"
    rule, _, key = ack.code.partition(":")
    if rule == "xid":
        if alert.rule == "xid":
            return alert.key == key
        codes = {basis.key for basis in alert.about if basis.key}
        return alert.rule.startswith("check:") and codes == {key}  # a finding on another Xid too still pages
    return alert.rule == rule and (not key or alert.key == key)


def parse_until(text: str, now: float) -> float:
    """``--until``: a duration from now (``8h``, ``2d``) or a time (ISO 8601; without an offset: UTC)."""
    from .config import parse_duration

    try:
        return now + parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{text!r} is neither a duration (8h, 2d) nor a time (2026-12-07T18:00, UTC unless it "
                         "says otherwise)") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if when.timestamp() <= now:
        raise ValueError(f"{text!r} is in the past")
    return when.timestamp()


def check_reason(reason: str) -> str:
    from gpuhealth.inert import one_line

    text = one_line(reason.strip())
    if not text:
        raise ValueError("a reason is required: say why (a ticket, who is on it)")
    if len(text) > MAX_REASON:
        raise ValueError(f"the reason is longer than {MAX_REASON} characters")
    return text


def load(store: Any) -> list[Ack]:
    return [Ack(*row) for row in store.acks()]


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def shown_time(until: float | None) -> str:
    """ "until cleared" or "until 2026-12-07T18:00Z"."""
    return "until cleared" if until is None else f"until {stamp(until)}"
