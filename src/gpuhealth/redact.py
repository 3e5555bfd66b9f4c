"""Secrets out of everything gpuhealth records: by variable name, and by the shape of the value.

Used for every file of a bundle (``RecordingHost``) and for the environment variables a snapshot keeps
(they reach JSON reports and saved runs). docs/limits.md lists what is matched.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import guarded_re, has_folded, lazy_re

SECRET_MARKERS = ("PASS", "PWD", "SECRET", "TOKEN", "KEY", "COOKIE", "CREDENTIAL", "DSN", "WEBHOOK", "AUTH")
REDACTED = "<redacted>"

# Any variable whose name says it holds a secret (case-insensitive, anywhere in the name).
_SECRET_NAME = guarded_re("|".join(SECRET_MARKERS), re.IGNORECASE,
                          may=has_folded(*(marker.lower() for marker in SECRET_MARKERS)))
# Values that are secrets whatever they are called: (literals one of which a match contains, pattern).
# A pattern runs only when one of its literals is in the text (a C-speed search), so a 64 MiB kernel log
# costs a few scans; every repetition is bounded, so a long line cannot make a pattern backtrack for long.
_SECRET_VALUES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (literals, lazy_re(pattern)) for literals, pattern in (
        (("://",), r"(?<=://)[^\s/@'\"<>]{1,512}(?=@)"),  # scheme://user:password@host, Sentry DSNs
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{20,255}"),  # GitHub
        (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{20,255}"),
        (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{8,255}"),  # Slack
        (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
        (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{2,8192}\.[A-Za-z0-9_-]{0,4096}"),  # JWTs
        (("AccountKey=", "SharedAccessKey="), r"\b(?:AccountKey|SharedAccessKey)=[^;\s'\"]{8,1024}"),  # Azure
        (("SharedAccessSignature",), r"\bSharedAccessSignature[=\s][^;\s'\"]{8,2048}"),
        (("sig=",), r"(?<=[?&]sig=)[^&\s'\"]{8,1024}"),  # Azure SAS URLs
        (("hooks.slack.com",), r"(?<=hooks\.slack\.com/)[A-Za-z0-9/_-]{8,512}"),  # webhooks
        (("/api/webhooks/",), r"(?<=/api/webhooks/)[A-Za-z0-9/_-]{8,512}"),
        (("webhook.office.com",), r"(?<=webhook\.office\.com/)[^\s'\"]{8,1024}"),
        (("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,255}"),  # GitLab, Hugging Face, OpenAI, Google, npm
        (("hf_",), r"\bhf_[A-Za-z0-9]{30,255}"),
        (("sk-",), r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,255}"),
        (("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),
        (("npm_",), r"\bnpm_[A-Za-z0-9]{36}"),
    ))
# NAME=value in recorded text (an environment dump, a unit file): upper-case names, as environments have.
_NAMED_ASSIGNMENT = lazy_re(r"(?<![A-Za-z0-9_])([A-Z_][A-Z0-9_]{0,63})=([^\s'\"]{1,4096})")


def redact_text(text: str) -> str:
    """``text`` with every secret-shaped value, and the value of every secret-named NAME=value, replaced."""
    for literals, pattern in _SECRET_VALUES:
        if any(literal in text for literal in literals):
            # An empty user and password (`https://:@host`, in kernel module banners) hides nothing.
            text = pattern.sub(lambda m: REDACTED if m[0].strip(":") else m[0], text)
    if any(marker in text for marker in SECRET_MARKERS):
        text = _NAMED_ASSIGNMENT.sub(
            lambda m: f"{m[1]}={REDACTED}" if _SECRET_NAME.search(m[1]) and m[2] != REDACTED else m[0], text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """``redact_text`` on bytes, keeping every other byte as it was (latin-1 maps bytes 1:1)."""
    return redact_text(data.decode("latin-1")).encode("latin-1")


def redact_environment(env: dict[str, str]) -> dict[str, str]:
    """Variables named like secrets are replaced whole; in the others, secret-shaped values are."""
    return {name: REDACTED if _SECRET_NAME.search(name) else redact_text(value)
            for name, value in sorted(env.items())}
