"""Secrets out of everything gpuhealth records: by variable name, and by the shape of the value.

Used for every file of a bundle (``RecordingHost``) and for the environment variables a snapshot keeps
(they reach JSON reports and saved runs). docs/limits.md lists what is matched.

Three kinds of rule:
- values shaped like secrets, whatever they are called (a GitHub token, a JWT, ``user:password@`` in a URL);
- upper-case ``NAME=value`` whose name holds a marker (an environment dump);
- on lines that hold a secret word (any case): command-line flags (``--password=X``, ``--token X``, mysql's
  ``-pX``), ``key: value`` and ``key=value`` pairs (kernel command line ``rd.luks.key=``, ``db_password=``,
  JSON ``"token": "..."``) whose key's last word means a secret, and ``Authorization:``/``Bearer`` credentials.
  Only the lines holding one of a few literals are matched (found in the lower-cased text at C speed), so a
  64 MiB kernel log is scanned, not regex-matched, and a key must END in a secret word (``token_file`` and
  ``Public-Key`` are not secrets), so evidence keeps its meaning.

Host identifiers (hostname, UUIDs, serials, IP and MAC addresses, user names) go only with ``--redact-host``:
``bundle.redact_bundle`` and ``redact_host_text`` below.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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


# A key means a secret when its LAST word (split at . _ - and camelCase) is one of these: `db_password`,
# `apiToken`, `client-secret`, `.pgpass`; not `token_file`, `password_hash_algo`, `bypass`.
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "pgpass", "secret", "token",
                           "credential", "credentials", "cookie", "apikey", "privatekey", "secretkey", "accesskey"})
# ... or its last word is `key` after one of these (`rd.luks.key`, `api_key`, `X-Api-Key`): a plain `key`
# (`kernel key: 0f1e...`, `Public-Key: (2048 bit)`) is evidence, not a secret.
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "luks", "crypt", "encryption", "client",
                             "session", "master", "auth", "signing", "license"})
_WORD = lazy_re(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# The lines worth matching hold one of these (lower-cased); every secret word above contains one.
_LINE_LITERALS = ("pass", "pwd", "secret", "token", "credential", "cookie", "key", "bearer", "authoriz", "mysql",
                  "mariadb")
_VALUE = r"""("[^"\n]{0,4096}"|'[^'\n]{0,4096}'|[^\s'",;]{1,4096})"""
# --name=value, --name value, -name value: the value never starts with "-" (that is the next flag).
_FLAG = lazy_re(r"(?<![\w-])(--?)([A-Za-z][A-Za-z0-9_.-]{0,63})(=|[ \t]+)"
                r"""("[^"\n]{0,4096}"|'[^'\n]{0,4096}'|(?!-)[^\s'"]{1,4096})""")
# key=value, key: value, "key": "value" (JSON), 'key' = 'value'
_PAIR = lazy_re(r"""(?<![\w.-])(["']?)([A-Za-z_][A-Za-z0-9_.-]{0,63})\1([ \t]*[:=][ \t]*)""" + _VALUE)
# Authorization: Bearer X / Basic X / token X (an HTTP header, a curl -H), and a bare "Bearer X"
_AUTHORIZATION = lazy_re(r"""(?i)\b((?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?)"""
                         r"((?:bearer|basic|token|digest|negotiate|apikey|sso-key)[ \t]+)?"
                         r"(?![{\[<])([^\s'\",;]{1,4096})")  # not a YAML mapping, a list or a <placeholder>
_BEARER = lazy_re(r"(?i)\b(bearer[ \t]+)([A-Za-z0-9._~+/=-]{8,4096})")
# mysql -pSECRET (the password glued to -p: a space would make it the database name)
_MYSQL_P = lazy_re(r"(?i)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mariadb|mariadb-dump)\b"
                   r"""[^\n|;&]{0,512}?[ \t]-p([^\s'";|&]{1,4096})""")
_SSHPASS_P = lazy_re(r"""\bsshpass\b[^\n|;&]{0,512}?[ \t]-p[ \t]*([^\s'";|&]{1,4096})""")  # sshpass -p SECRET


def secret_name(name: str) -> bool:
    """Whether a flag's or key's name means its value is a secret: its last word says so."""
    words = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return False
    last = words[-1]
    if last == "pass":  # `db_pass`, `smtp-pass`; a bare `pass` is a test's verdict ("pass: 3") or a count
        return len(words) > 1
    return last in _SECRET_WORDS or (last == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS)


def _redacted_value(value: str) -> str:
    """A value replaced, its quotes kept (`"x"` -> `"<redacted>"`), so JSON and shell lines keep their shape."""
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{quote}{REDACTED}{quote}"


def _is_redacted(value: str) -> bool:
    return value.strip("'\"") in (REDACTED, "")


def _flag(m: re.Match[str]) -> str:
    if not secret_name(m[2]) or _is_redacted(m[4]):
        return m[0]
    return f"{m[1]}{m[2]}{m[3]}{_redacted_value(m[4])}"


def _pair(m: re.Match[str]) -> str:
    if not secret_name(m[2]) or _is_redacted(m[4]):
        return m[0]
    return f"{m[1]}{m[2]}{m[1]}{m[3]}{_redacted_value(m[4])}"


_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "apikey", "sso-key"})


def _authorization(m: re.Match[str]) -> str:
    if _is_redacted(m[3]) or (m[2] is None and m[3].lower() in _AUTH_SCHEMES):  # "Bearer <redacted>" again
        return m[0]
    return f"{m[1]}{m[2] or ''}{REDACTED}"


def _tail_group(m: re.Match[str]) -> str:
    """The match with its last group (the secret at its end) replaced."""
    return m[0] if _is_redacted(m[m.lastindex or 0]) else m[0][:m.start(m.lastindex or 0) - m.start()] + REDACTED


def _redact_line(line: str, lowered: str) -> str:
    """The rules on one line; each runs only when its literal is on the line (``lowered``: the line, lower-cased)."""
    if "authoriz" in lowered:
        line = _AUTHORIZATION.sub(_authorization, line)
    if "bearer" in lowered:
        line = _BEARER.sub(lambda m: m[0] if _is_redacted(m[2]) else f"{m[1]}{REDACTED}", line)
    if "mysql" in lowered or "mariadb" in lowered:
        line = _MYSQL_P.sub(_tail_group, line)
    if "sshpass" in lowered:
        line = _SSHPASS_P.sub(_tail_group, line)
    if "-" in line:
        line = _FLAG.sub(_flag, line)
    if "=" in line or ":" in line:
        line = _PAIR.sub(_pair, line)
    return line


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")  # not `string`: an import


def _lowered(text: str) -> str:
    """``text`` lower-cased with every character where it was (only the positions of literals are needed)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)  # "İ" lowers to two


def _redact_secret_lines(text: str, lowered: str) -> str:
    """``_redact_line`` on each line that holds one of ``_LINE_LITERALS``; the other lines are copied."""
    spans: dict[int, int] = {}
    for literal in _LINE_LITERALS:
        found = lowered.find(literal)
        while found != -1:
            start = lowered.rfind("\n", 0, found) + 1
            end = lowered.find("\n", found)
            end = len(text) if end == -1 else end
            spans[start] = end
            found = lowered.find(literal, end)
    if not spans:
        return text
    out, position = [], 0
    for start in sorted(spans):
        out += [text[position:start], _redact_line(text[start:spans[start]], lowered[start:spans[start]])]
        position = spans[start]
    out.append(text[position:])
    return "".join(out)


def redact_text(text: str, lowered: str | None = None) -> str:
    """``text`` with every secret-shaped value, and the value of every secret-named NAME=value, flag and
    ``key: value`` pair, replaced. ``lowered``: ``text`` lower-cased (ASCII), when the caller has it."""
    for literals, pattern in _SECRET_VALUES:
        if any(literal in text for literal in literals):
            # An empty user and password (`https://:@host`, in kernel module banners) hides nothing.
            text = pattern.sub(lambda m: REDACTED if m[0].strip(":") else m[0], text)
            lowered = None  # positions moved
    if any(marker in text for marker in SECRET_MARKERS):
        named = _NAMED_ASSIGNMENT.sub(
            lambda m: f"{m[1]}={REDACTED}" if _SECRET_NAME.search(m[1]) and m[2] != REDACTED else m[0], text)
        lowered, text = (lowered if named == text else None), named
    return _redact_secret_lines(text, _lowered(text) if lowered is None else lowered)


def redact_bytes(data: bytes) -> bytes:
    """``redact_text`` on bytes, keeping every other byte as it was (latin-1 maps bytes 1:1)."""
    return redact_text(data.decode("latin-1"), data.lower().decode("latin-1")).encode("latin-1")


def redact_environment(env: dict[str, str]) -> dict[str, str]:
    """Variables named like secrets are replaced whole; in the others, secret-shaped values are."""
    return {name: REDACTED if _SECRET_NAME.search(name) else redact_text(value)
            for name, value in sorted(env.items())}


# --------------------------------------------------------------------------- host identifiers (--redact-host)

# IPv4: four octets 0-255 without leading zeros, not inside a longer dotted run (a VBIOS 96.00.89.00.01, a
# version 1.2.3.4.5), not after a letter, "-" or "v" (a release `5.15.0-91`, `v1.2.3.4`); 535.161.08 (three
# parts) and 0000:19:00.0 (a PCI address) never match.
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = lazy_re(rf"(?<![\w.-]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w.]|-\d)")
# IPv6 candidates (hex groups and at least two colons), each checked by ipaddress; never next to a word
# character or a dot (`c10::Error` is C++, 0000:19:00.0 a PCI address, 12:02:03.5 a time).
_IPV6 = lazy_re(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%[A-Za-z0-9]{1,15})?(?![\w:.])")
# A dotted quad right after one of these is a version, not an address ("Version 1.2.3.4", "pkg==1.2.3.4"),
# and so is one on a package line of PyTorch's collect_env ("[pip3] ...", "[conda] ...").
_VERSION_BEFORE = lazy_re(r"(?i)(?:\b(?:version|ver|release|firmware|vbios|bios|rev|build)[\s:=]{0,4}|[=<>~!]=)$")
_PACKAGE_LINE = lazy_re(r"(?:^|\n)\[(?:pip\d?|conda)\][^\n]*$")
# MAC addresses (six octets) and EUI-64 / InfiniBand GUIDs (eight), with ":" or "-" throughout.
_MAC = lazy_re(r"(?<![\w:.-])[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}(?:(?:\1[0-9A-Fa-f]{2}){2})?"
               r"(?![\w:.-])")
# User names where they are user names: a home directory, a shell prompt, a USER=/LOGNAME= value.
_HOME = lazy_re(r"(?<![\w.-])(/home/|/Users/)([A-Za-z0-9_][A-Za-z0-9._-]{0,31})(?=[/\s'\":]|$)", re.MULTILINE)
_PROMPT = lazy_re(r"(?:^|(?<=[\s\[(]))([a-z_][a-z0-9_.-]{0,31})@([A-Za-z0-9][A-Za-z0-9.-]{0,252})"
                  r"(?=:[~/]|[ \t][^\]\n]{0,200}\][$#]|[ \t]?[$#](?:[ \t]|$))", re.MULTILINE)
_USER_VARIABLE = lazy_re(r"""\b((?:USER|LOGNAME|USERNAME|SUDO_USER)(?:=|"[ \t]*:[ \t]*"))"""
                         r"([A-Za-z0-9_][A-Za-z0-9._-]{0,31})")
# Not identifying, and worth keeping: who ran it as root is evidence.
_SYSTEM_USERS = frozenset({"root", "nobody", "user-redacted"})
_UNIDENTIFYING_MACS = frozenset({"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"})
# Documentation ranges (RFC 5737, RFC 3849): a placeholder still reads as an address.
_IPV4_PLACEHOLDERS = ("192.0.2.", "198.51.100.", "203.0.113.")


class HostIdentifiers:
    """Stable placeholders for one bundle: the same address or name gets the same placeholder in every file,
    so a redacted bundle still shows which lines are about the same interface, peer or user."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], str] = {}  # (kind, value) -> placeholder
        self.counts: dict[str, int] = {}  # kind -> placeholders handed out

    def _placeholder(self, kind: str, value: str, make: Callable[[int], str]) -> str:
        key = (kind, value)
        if key not in self.seen:
            number = self.counts.get(kind, 0)
            self.counts[kind] = number + 1
            self.seen[key] = make(number)
        return self.seen[key]

    def ipv4(self, m: re.Match[str]) -> str:
        import ipaddress

        value = m[0]
        before = m.string[max(0, m.start() - 160):m.start()]
        if value.startswith("0.") or _VERSION_BEFORE.search(before[-12:]) or _PACKAGE_LINE.search(before):
            return value  # 0.x.x.x is no host's address: a version (0.4.4.3)
        address = ipaddress.IPv4Address(value)
        if address.is_loopback or address.is_unspecified or address.is_multicast or value.startswith("255."):
            return value  # not identifying (and 255.255.255.0 is a netmask)
        return self._placeholder("ipv4", value, lambda n: f"{_IPV4_PLACEHOLDERS[min(n // 254, 2)]}{n % 254 + 1}")

    def ipv6(self, value: str) -> str:
        import ipaddress

        try:
            address = ipaddress.IPv6Address(value.split("%")[0])
        except ValueError:
            return value
        groups = [g for g in value.split("%")[0].split(":") if g]
        if "::" not in value and len(groups) < 8:
            return value  # a time (12:02:03) or a counter list, not an address
        if address.is_loopback or address.is_unspecified or all(g.isdigit() and len(g) <= 2 for g in groups):
            return value
        if all(len(g) == 2 for g in groups):  # a MAC or a GUID's octets (already placeholders), not an address
            return value
        return self._placeholder("ipv6", value.lower(), lambda n: f"2001:db8::{n + 1:x}")

    def mac(self, value: str) -> str:
        if value.lower().replace("-", ":") in _UNIDENTIFYING_MACS:
            return value
        separator = value[2]
        octets = len(value.split(separator))
        return self._placeholder("mac", value.lower().replace("-", ":"), lambda n: separator.join(
            ["02"] + ["00"] * (octets - 3) + [f"{(n + 1) // 256:02x}", f"{(n + 1) % 256:02x}"]))

    def user(self, value: str) -> str:
        if value in _SYSTEM_USERS:
            return value
        return self._placeholder("user", value, lambda n: f"user{n + 1}")

    def host(self, value: str) -> str:
        if value.startswith("host-redacted"):
            return value
        return self._placeholder("host", value, lambda n: f"host-redacted-{n + 1}")


def redact_host_text(text: str, ids: HostIdentifiers) -> str:
    """``text`` with IP addresses (v4 and v6), MAC addresses and user names replaced by ``ids``' placeholders.
    PCI addresses, versions, kernel releases and times keep their text (see the patterns above)."""
    if "." in text:
        text = _IPV4.sub(ids.ipv4, text)
    if ":" in text or "-" in text:  # before IPv6: eight octets with colons are a GUID, and parse as IPv6
        text = _MAC.sub(lambda m: ids.mac(m[0]), text)
    if "::" in text or text.count(":") >= 7:
        text = _IPV6.sub(lambda m: ids.ipv6(m[0]), text)
    if "/home/" in text or "/Users/" in text:
        text = _HOME.sub(lambda m: m[1] + ids.user(m[2]), text)
    if "@" in text:
        text = _PROMPT.sub(lambda m: f"{ids.user(m[1])}@{ids.host(m[2])}", text)
    if "USER" in text or "LOGNAME" in text:
        text = _USER_VARIABLE.sub(lambda m: m[1] + ids.user(m[2]), text)
    return text
