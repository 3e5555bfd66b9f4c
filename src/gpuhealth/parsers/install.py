"""Driver-install evidence: ``mokutil --sb-state``, ``dkms status``, ``gcc --version``, ``modinfo``,
the compiler in ``/proc/version``, the kernel command line, and initramfs listings.

The formats are from the tools' own output (the tools' own messages and the field report 001); the corpus
holds no sample of them, so the tests use hand-written samples in these shapes.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import guarded_re, has, has_folded, lazy_re
from gpuhealth.model import DkmsEntry, ParseError

# --------------------------------------------------------------------------- mokutil --sb-state

# mokutil --sb-state (lcp/mokutil src/mokutil.c, sb_state_internal, 0.4.0 to 0.7.2): "SecureBoot enabled", then
# "SecureBoot validation is disabled in shim" where shim's MokSBStateRT exists (shim tells the kernel not to enforce);
# "SecureBoot disabled", then "Platform is in Setup Mode" where the firmware holds no platform key (nothing is
# verified); "Cannot determine secure boot state." where the SecureBoot and SetupMode variables hold neither.
# main() says "EFI variables are not supported on this system" where libefivar sees no EFI variables (a legacy BIOS
# boot, or efivarfs not mounted, as in a container) and "This system doesn't support Secure Boot" where the firmware
# has no SecureBoot variable.
_SB_STATE = guarded_re(r"^\s*SecureBoot\s+(enabled|disabled)\s*$", re.IGNORECASE | re.MULTILINE,
                       may=has_folded("secureboot"))
_SB_VALIDATION_OFF = guarded_re(r"SecureBoot validation is disabled in shim", re.IGNORECASE,
                                may=has_folded("secureboot validation is disabled in shim"))
_SB_SETUP_MODE = guarded_re(r"^\s*Platform is in Setup Mode\s*$", re.MULTILINE, may=has("Setup Mode"))
_SB_UNSUPPORTED = guarded_re(r"doesn't support Secure Boot", re.IGNORECASE,
                             may=has_folded("doesn't support secure boot"))
# the lines that say mokutil could not read the state: never a state, enabled or disabled
_SB_UNREAD = guarded_re(r"^\s*(?:Cannot determine secure boot state\.?|EFI variables are not supported on this system|"
                        r"Failed to read \"(?:SecureBoot|SetupMode)\" variable: [^\n]{0,120})\s*$", re.MULTILINE,
                        may=has("Cannot determine", "EFI variables are not supported", "Failed to read"))
SB_UNREAD_WHY = {"Cannot determine": "the firmware's SecureBoot and SetupMode variables hold neither state",
                 "EFI variables": "no EFI variables are visible: a legacy BIOS boot, or efivarfs not mounted (as in "
                                  "a container)",
                 "Failed to read": "mokutil could not read the firmware's variable"}


def parse_mokutil_sb_state(text: str) -> str:
    """``enabled``, ``disabled`` or ``unsupported`` (a firmware without the SecureBoot variable).

    "SecureBoot enabled" followed by "SecureBoot validation is disabled in shim" counts as disabled:
    shim then tells the kernel not to enforce signatures. Either line of a state's second line alone says the
    same (mokutil prints "validation is disabled" only under "SecureBoot enabled", "Setup Mode" only under
    "SecureBoot disabled"). The lines that say mokutil could not read the state raise ParseError
    (:func:`mokutil_unread`).
    """
    if not isinstance(text, str):
        raise ParseError("mokutil output must be text")
    match = _SB_STATE.search(text)
    if match:
        state = match[1].lower()
        if state == "enabled" and _SB_VALIDATION_OFF.search(text):
            return "disabled"
        return state
    if _SB_VALIDATION_OFF.search(text) or _SB_SETUP_MODE.search(text):
        return "disabled"
    if _SB_UNSUPPORTED.search(text):
        return "unsupported"
    unread = mokutil_unread(text)
    if unread:
        raise ParseError(f"mokutil could not read the Secure Boot state: '{unread}'")
    raise ParseError("no 'SecureBoot enabled/disabled' line")


def mokutil_unread(text: str) -> str | None:
    """mokutil's line saying it could not read the Secure Boot state ("Cannot determine secure boot state.", "EFI
    variables are not supported on this system", 'Failed to read "SecureBoot" variable: ...'), or None."""
    if not isinstance(text, str):
        raise ParseError("mokutil output must be text")
    match = _SB_UNREAD.search(text[:8192])
    return match[0].strip() if match else None


def mokutil_unread_why(line: str) -> str:
    """What mokutil's can't-read line means, in words."""
    return next((why for start, why in SB_UNREAD_WHY.items() if line.startswith(start)), "")


_SB_LINE = guarded_re(r"^\s*(?:SecureBoot (?:enabled|disabled)|SecureBoot validation is disabled in shim|"
                      r"Platform is in Setup Mode|This system doesn't support Secure Boot|"
                      r"input password(?: again)?: ?)\s*$",
                      may=has("SecureBoot", "Setup Mode", "Secure Boot", "input password"))


def mokutil_line(line: str) -> bool:
    """Whether ``line`` is one mokutil prints about the Secure Boot state or a key (its grammar knows it, however
    sentence-like): the state's lines, the can't-read lines, --test-key's and --import's answers, the password
    prompt."""
    if not isinstance(line, str):
        raise ParseError("mokutil output must be text")
    text = line[:400]
    return bool(_SB_LINE.match(text) or _SB_UNREAD.match(text) or parse_mokutil_test_key(text))


# mokutil --test-key KEY prints one of these about the key (lcp/mokutil src/mokutil.c, test_key() and
# print_skip_message() for an enrollment request): "<KEY> is not enrolled" (exit 1), "<KEY> is already enrolled",
# "... is already in db", "... is already in the built-in trusted keyring" (with --check-keyring),
# "... is already in the enrollment request" (imported, not yet confirmed at boot), "... is blocked in dbx";
# with --ca-check, "CA of <KEY> is already enrolled" / "CA of <KEY> is blocked" (the key's issuer decides).
# `mokutil --import KEY` answers a key it does not add to the request the same way, after "SKIP: "
# (issue_mok_request: printf("SKIP: ") then print_skip_message), or "Already in kernel trusted keyring. Skip <KEY>";
# `mokutil --delete KEY` says "SKIP: <KEY> is not in MokList" of a key that is not enrolled.
_TEST_KEY = lazy_re(r"^\s*(?:SKIP: |CA of )?(?P<key>\S{1,300}) is (?P<state>not enrolled|already enrolled|"
                       r"already in db|already in the built-in trusted keyring|already in the enrollment request|"
                       r"blocked in dbx|blocked in MokListX|blocked|not in MokList)\s*$"
                       r"|^\s*Already in kernel trusted keyring\. Skip (?P<trusted>\S{1,300})\s*$")
_KEY_FILE = lazy_re(r"/|\.(?:der|pub|cer|crt|pem|x509)$", re.IGNORECASE)
TEST_KEY_STATES = {"not enrolled": "not-enrolled", "already enrolled": "enrolled", "already in db": "enrolled",
                   "already in the built-in trusted keyring": "enrolled",
                   "already in the enrollment request": "pending", "blocked in dbx": "blocked",
                   "blocked in MokListX": "blocked", "blocked": "blocked", "not in MokList": "not-enrolled"}


def parse_mokutil_test_key(line: str) -> tuple[str, str] | None:
    """One line of ``mokutil --test-key KEY`` (or of ``--import``'s answer for a key it skips): (KEY, "enrolled" /
    "not-enrolled" / "pending" / "blocked"), or None for any other line. The key must look like a key file (a
    path, or .der/.pub/...): prose such as "the key is not enrolled" names none."""
    if not isinstance(line, str):
        raise ParseError("mokutil output must be text")
    match = _TEST_KEY.match(line[:400])
    if match is None:
        return None
    if match["trusted"]:  # --import's "Already in kernel trusted keyring. Skip KEY": the kernel trusts it
        return (match["trusted"], "enrolled") if _KEY_FILE.search(match["trusted"]) else None
    if not _KEY_FILE.search(match["key"]) or (match["state"] == "blocked" and "CA of " not in match[0]):
        return None  # a bare "is blocked" is --ca-check's answer about the key's CA only
    return match["key"], TEST_KEY_STATES[match["state"]]


# Debian's update-secureboot-policy (shim-signed-common) checks the DKMS key before it offers to enroll one: it
# compares the serial of /var/lib/dkms/mok.pub (its dkms_mok_pubkey) with those `mokutil --list-enrolled` prints, and
# says "  E: System's DKMS key is NOT installed in MOK." or "  [ OK ] System DKMS key is registered via MOK".
DEBIAN_DKMS_KEY = "/var/lib/dkms/mok.pub"
_POLICY_KEY = lazy_re(r"^\s*(?:E: System's DKMS key is (?P<missing>NOT installed in MOK)|\[ OK \] System DKMS key "
                      r"is (?P<found>registered via MOK))\.?\s*$")


def parse_secureboot_policy_key(line: str) -> tuple[str, str] | None:
    """One line of Debian's ``update-secureboot-policy``: (DKMS's certificate, "not-enrolled" / "enrolled") for its
    verdict on the DKMS key, or None for any other line."""
    if not isinstance(line, str):
        raise ParseError("update-secureboot-policy output must be text")
    match = _POLICY_KEY.match(line[:400])
    if match is None:
        return None
    return DEBIAN_DKMS_KEY, "not-enrolled" if match["missing"] else "enrolled"


# Debian's update-secureboot-policy (shim-signed-common, setup_mok_validation) reads the SecureBoot EFI variable first
# and stops with "Secure Boot not enabled on this system." where it is not 1; then "The Secure Boot policy was already
# changed since last reboot; nothing to do." where a change waits for shim (MokSB); then DKMS's key and modules:
# "<script>: Checking status of DKMS module signing:", "  [ OK ] System DKMS key found in /var/lib/dkms/mok.pub", the
# verdict on the key, "  E: <module> is not signed with the DKMS key", "  Some modules not signed with the DKMS key.
# Rebuild?.", "  [ OK ] All DKMS modules signed with the DKMS key". Every one of these was printed with the SecureBoot
# variable at 1: the firmware enforces Secure Boot (with --enable, shim's validation was off: no state is read then).
_POLICY_ENABLED = guarded_re(r"^\s*(?:\S{1,300}: Checking status of DKMS module signing:|\[ OK \] System DKMS key "
                             r"(?:found in \S{1,300}|is registered via MOK)|"
                             r"E: System's DKMS key is NOT installed in MOK\.?|"
                             r"E: \S{1,300} is not signed with the DKMS key|"
                             r"Some modules not signed with the DKMS key\. "
                             r"Rebuild\?\.?|\[ OK \] All DKMS modules signed with the DKMS key|The Secure Boot policy "
                             r"was already changed since last reboot; nothing to do\.)\s*$",
                             may=has("DKMS", "Secure Boot policy"))
# its lines that say nothing of the state on their own: no DKMS module to check, the prompt not shown, Ubuntu's
# --new-key making the MOK ("Generating a new Secure Boot signing key:", whatever the state)
_POLICY_OTHER = guarded_re(r"^\s*(?:No DKMS packages installed: not changing Secure Boot validation state\.|"
                           r"Running in non-interactive mode, doing nothing\.|All OK, nothing to do\.|"
                           r"Secure Boot not enabled on this system\.|Generating a new Secure Boot signing key:)\s*$",
                           may=has("No DKMS packages", "non-interactive mode", "All OK", "Secure Boot not enabled",
                                   "Secure Boot signing key"))


def secureboot_policy_line(line: str) -> str | None:
    """"enabled" for a line of Debian's update-secureboot-policy printed only once it read the SecureBoot EFI
    variable at 1, "other" for its other lines, None for any other line."""
    if not isinstance(line, str):
        raise ParseError("update-secureboot-policy output must be text")
    text = line[:400]
    if _POLICY_ENABLED.match(text):
        return "enabled"
    return "other" if _POLICY_OTHER.match(text) else None


# A key shim does not trust yet is the decisive one: a module signed with it is refused under Secure Boot.
_KEY_STATE_RANK = {"blocked": 0, "not-enrolled": 1, "pending": 2, "enrolled": 3}


def least_trusted_key(lines: list[str]) -> tuple[str, str, str] | None:
    """(KEY, state, line) of the ``mokutil --test-key`` answer (or Debian's update-secureboot-policy verdict on the
    DKMS key) among ``lines`` that trusts its key least (several keys tested: the one a module signed with would be
    refused), or None when no line is such an answer."""
    found = [(answer, line.strip()) for line in lines[:2000]
             if (answer := parse_mokutil_test_key(line) or parse_secureboot_policy_key(line)) is not None]
    if not found:
        return None
    (key, state), line = min(found, key=lambda item: _KEY_STATE_RANK[item[0][1]])
    return key, state, line[:400]


def secure_boot_from_efivar(data: bytes) -> str:
    """The SecureBoot EFI variable file: 4 attribute bytes, then 1 (enabled) or 0 (disabled)."""
    if not isinstance(data, (bytes, bytearray)) or len(data) < 5:
        raise ParseError("SecureBoot EFI variable shorter than 5 bytes")
    if data[4] not in (0, 1):
        raise ParseError(f"SecureBoot EFI variable value is {data[4]}, not 0 or 1")
    return "enabled" if data[4] == 1 else "disabled"


# --------------------------------------------------------------------------- dkms status

# dkms 3: "nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed"
# dkms 2: "nvidia, 535.161.08, 5.15.0-105-generic, x86_64: installed"
# either, not built for any kernel: "nvidia/535.161.08: added"
# One way to match each comma-separated field (no overlapping \s* around them): a long line with no
# colon must fail in linear time, not backtrack exponentially.
_DKMS_TAIL = r"(?P<rest>(?:,[^,:]*)*):\s*(?P<state>\S.*)$"
_DKMS_NEW = lazy_re(r"^(?P<module>[\w.+-]+)/(?P<version>[\w.+~-]+)" + _DKMS_TAIL)
_DKMS_OLD = lazy_re(r"^(?P<module>[\w.+-]+),\s*(?P<version>[\w.+~-]+)" + _DKMS_TAIL)
_DKMS_STATE = lazy_re(r"^(added|built|installed|installed-weak|broken)\b", re.IGNORECASE)
_DKMS_NOISE = lazy_re(r"^(?:Error!|Warning:|WARNING:|Deprecated|dkms:)", re.IGNORECASE)


def parse_dkms_status(text: str) -> tuple[DkmsEntry, ...]:
    """Every module/version/kernel line of ``dkms status`` (dkms 2 and 3 formats).

    Empty output means no DKMS modules (valid). Warning and error lines dkms prints among the status
    lines are skipped; ParseError when there is text but no status line.
    """
    if not isinstance(text, str):
        raise ParseError("dkms status output must be text")
    entries: list[DkmsEntry] = []
    other = 0
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _DKMS_NEW.match(line) or _DKMS_OLD.match(line)
        if match is None or not _DKMS_STATE.match(match["state"]) or _DKMS_NOISE.match(line):
            other += 1
            continue
        rest = [part.strip() for part in match["rest"].split(",") if part.strip()]
        entries.append(DkmsEntry(
            module=match["module"], version=match["version"],
            kernel=rest[0] if rest else None, arch=rest[1] if len(rest) > 1 else None,
            state=match["state"].strip(),
        ))
    if not entries and other:
        raise ParseError("no dkms status lines (<module>/<version>, <kernel>, <arch>: <state>)")
    return tuple(entries)


# --------------------------------------------------------------------------- gcc --version, /proc/version

# The name is checked for "cc" in code: ``\S*(?:gcc|cc)\S*`` backtracks quadratically over a run of "c".
_GCC_BANNER = lazy_re(r"^(?P<name>\S{1,200})\s+\((?P<package>[^()]*(?:\([^()]*\)[^()]*)*)\)\s+"
                         r"(?P<version>\d+(?:\.\d+)+)\b")


def parse_gcc_version(text: str) -> tuple[str, str]:
    """``(version, first line)`` from ``gcc --version``: ``gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0``."""
    if not isinstance(text, str):
        raise ParseError("gcc --version output must be text")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    match = _GCC_BANNER.match(first)
    if match is None or "cc" not in match["name"]:
        raise ParseError("first line is not '<gcc> (<package>) <version>'")
    return match["version"], first


# "(gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld ...)", "(x86_64-linux-gnu-gcc-12 (Ubuntu ...) 12.3.0, ...)",
# "(gcc version 4.8.5 20150623 (Red Hat 4.8.5-44) (GCC) )",
# "(gcc (GCC) 11.4.1 20230605 (Red Hat 11.4.1-2), GNU ld ...)", "(Ubuntu clang version 17.0.6, ...)"
_KERNEL_GCC_NEW = lazy_re(r"\((?:[\w.]+-)*gcc(?:-\d+)? \([^()]*\) (\d+(?:\.\d+)+)")
_KERNEL_GCC_OLD = lazy_re(r"\(gcc version (\d+(?:\.\d+)+)")
_KERNEL_CLANG = lazy_re(r"clang version (\d+(?:\.\d+)+)")


def parse_kernel_compiler(proc_version: str) -> str:
    """The compiler that built the running kernel, from ``/proc/version``: ``gcc 11.4.0``, ``clang 17.0.6``."""
    if not isinstance(proc_version, str) or not proc_version.lstrip().startswith("Linux version"):
        raise ParseError("not a /proc/version line ('Linux version ...')")
    for pattern, name in ((_KERNEL_GCC_NEW, "gcc"), (_KERNEL_GCC_OLD, "gcc"), (_KERNEL_CLANG, "clang")):
        match = pattern.search(proc_version)
        if match:
            return f"{name} {match[1]}"
    raise ParseError("/proc/version names no gcc or clang version")


_PROC_VERSION_RELEASE = lazy_re(r"Linux version (\S{1,200})")


def parse_proc_version(text: str) -> tuple[str, str | None]:
    """``cat /proc/version``: (kernel release, its compiler as :func:`parse_kernel_compiler` names it, or None
    when the line names neither gcc nor clang). ``Linux version 4.4.0-31-generic (buildd@lgw01-16) (gcc
    version 5.3.1 20160413 ...) #50-Ubuntu SMP ...`` -> ``("4.4.0-31-generic", "gcc 5.3.1")``."""
    if not isinstance(text, str):
        raise ParseError("/proc/version must be text")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ParseError("/proc/version is one line ('Linux version <release> (...) (<compiler>) #...')")
    match = _PROC_VERSION_RELEASE.match(lines[0])
    if match is None:
        raise ParseError("not a /proc/version line ('Linux version <release> ...')")
    try:
        compiler: str | None = parse_kernel_compiler(lines[0])
    except ParseError:
        compiler = None
    return match[1], compiler


# --------------------------------------------------------------------------- modinfo

_MODINFO_FIELD = lazy_re(r"^(?P<key>[a-z_]+):\s*(?P<value>.*)$")  # value stripped in code (no lazy `.*?\s*$`)


def parse_modinfo(text: str) -> dict[str, str]:
    """``modinfo <module>``: the first value of each field (filename, version, signer, vermagic ...).

    A signed module has a ``signer`` field; an unsigned one has none. ParseError without ``filename``.
    """
    if not isinstance(text, str):
        raise ParseError("modinfo output must be text")
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = _MODINFO_FIELD.match(line)
        if match:
            fields.setdefault(match["key"], match["value"].strip())
    if "filename" not in fields:
        raise ParseError("no 'filename:' field")
    return fields


# --------------------------------------------------------------------------- kernel command line

_CMDLINE_BLACKLIST_KEYS = ("modprobe.blacklist", "module_blacklist", "rd.driver.blacklist")


def kernel_cmdline_blacklist(text: str) -> dict[str, str]:
    """Module -> the parameter that keeps it from loading on the booted system: ``module_blacklist=`` (the kernel
    refuses to load it at all) and ``modprobe.blacklist=`` (modprobe treats it as a ``blacklist`` line). dracut's
    ``rd.driver.blacklist=`` is left out: it applies inside the initramfs only, and the booted system loads the module.
    Names use ``_`` for ``-``; any text is a command line (ParseError only for non-text or a NUL byte)."""
    if not isinstance(text, str) or "\x00" in text:
        raise ParseError("kernel command line must be text")
    found: dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key in ("module_blacklist", "modprobe.blacklist"):
            for module in value.split(","):
                if module.strip():
                    found.setdefault(module.strip().replace("-", "_"), key)
    return found


def parse_kernel_cmdline_modules(text: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """Modules the kernel command line blacklists and module options it sets (``nouveau.modeset=0``).

    Module names use ``_`` for ``-`` as modprobe does. Any text is a command line; ParseError only for
    non-text or a NUL byte.
    """
    if not isinstance(text, str) or "\x00" in text:
        raise ParseError("kernel command line must be text")
    blacklisted: dict[str, None] = {}
    options: dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep:
            continue
        if key in _CMDLINE_BLACKLIST_KEYS:
            for module in value.split(","):
                if module.strip():
                    blacklisted.setdefault(module.strip().replace("-", "_"), None)
        elif "." in key and not key.startswith(("rd.", "modprobe.")):
            module, _, param = key.partition(".")
            if module and param:
                module = module.replace("-", "_")
                options[module] = f"{options[module]} {param}={value}" if module in options else f"{param}={value}"
    return tuple(blacklisted), options


# --------------------------------------------------------------------------- initramfs listings

_NOUVEAU_KO = lazy_re(r"(?:^|/)nouveau\.ko(?:\.(?:xz|zst|gz|bz2|lz4))?$")
_MODPROBE_CONF = lazy_re(r"(?:^|/)(?:etc|lib|usr/lib)/modprobe\.d/(?P<name>[^/\s]+\.conf)$")


def parse_initramfs_listing(text: str) -> tuple[bool, tuple[str, ...]]:
    """From ``lsinitramfs`` (paths) or ``lsinitrd`` (``ls -l`` lines): whether a nouveau .ko is packed,
    and the names of the modprobe.d files packed (a blacklist packed beside nouveau.ko still applies).

    ParseError when no line ends in a path.
    """
    if not isinstance(text, str):
        raise ParseError("initramfs listing must be text")
    nouveau = False
    confs: dict[str, None] = {}
    paths = 0
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        path = words[-1]
        if len(words) >= 3 and words[-2] == "->":  # lsinitrd prints symbolic links as "a -> b"
            path = words[-3]
        if "/" not in path and "." not in path:
            continue
        paths += 1
        if _NOUVEAU_KO.search(path):
            nouveau = True
        conf = _MODPROBE_CONF.search(path)
        if conf:
            confs.setdefault(conf["name"], None)
    if not paths:
        raise ParseError("no file paths in the initramfs listing")
    return nouveau, tuple(confs)
