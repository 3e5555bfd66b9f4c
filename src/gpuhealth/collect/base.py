"""What every probe shares: the ``Probed`` result and reading a host file as text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuhealth.host import Host


@dataclass
class Probed:
    """What one probe found: snapshot fields, reasons for missing evidence, and their sources."""

    fields: dict[str, Any] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def read_text(host: Host, path: str) -> tuple[str | None, str | None]:
    """A host file as text, or None and the reason it could not be read."""
    content = host.read(path)
    return content.text, content.error
