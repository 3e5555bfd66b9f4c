"""Evidence kinds: what a pasted or attached piece of text is, and the snapshot fields it fills.

See ``registry.py`` for the registration API; ``builtin.py`` holds the kinds gpuhealth has always read.
"""

from gpuhealth.evidence.registry import (
    KINDS,
    EvidenceKind,
    evidence_kind,
    identify,
    kinds_for_command,
    load,
    normalise_command,
    ordered,
    register,
    route,
)

__all__ = ["KINDS", "EvidenceKind", "evidence_kind", "identify", "kinds_for_command", "load", "normalise_command",
           "ordered", "register", "route"]
