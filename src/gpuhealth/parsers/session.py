"""Split a pasted terminal session into (command, output) blocks.

People paste what their shell showed: prompts, the commands they typed, and what each printed. A prompt
starts a block; the output runs until the next prompt. Recognised prompts:

- ``$ cmd``, ``(venv) $ cmd``, ``user@host:~$ cmd``, ``root@host:~# cmd``, ``user@host ~ % cmd`` (zsh),
  ``[root@host ~]# cmd``, ``[user@host dir]$ cmd``, ``bash-5.1$ cmd``, ``sh-4.4# cmd``;
- ``# cmd`` only when the first word is a known command: ``# `` also starts shell comments and
  config-file lines, and a root prompt without ``user@host`` is rarer than a comment;
- Python: ``>>> code`` with its ``... `` continuation lines, and IPython's ``In [1]: code`` (``Out[1]:``
  is output);
- in a text that has one of those prompts, a GPU tool's command line pasted without its prompt
  (``nvidia-smi --query-gpu=... --format=csv``, ``dcgmi dmon -e 230``): the tool's name, then an option or
  one of its subcommands, and nothing else on the line. Neither tool prints such a line itself.

Kernel-log lines (``[    5.123] ...``), nvidia-smi tables (``|``, ``+---``) and log lines never look like
prompts, so whole files that are not sessions stay one block.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

MAX_SESSION_CHARS = 4 * 1024 * 1024  # larger texts are files, not pastes: never split

_VENV = r"(?:\([^()\s]{1,64}\)\s*)?"
_USER_HOST = r"[\w.-]{1,64}@[\w.-]{1,64}"
_PROMPTS = (
    lazy_re(_VENV + _USER_HOST + r"(?::[^\s$#%]{0,200})?\s?(?:[~\w./-]{0,200}\s)?[$#%](?:\s(?P<cmd>.*))?$"),
    lazy_re(_VENV + r"\[" + _USER_HOST + r"(?:\s[^\]]{0,200})?\][$#](?:\s?(?P<cmd>.*))?$"),
    lazy_re(r"(?:ba|z|k)?sh-\d[\d.]{0,10}[$#](?:\s(?P<cmd>.*))?$"),
    lazy_re(_VENV + r"\$(?:\s(?P<cmd>.*))?$"),
)
_ROOT_PROMPT = lazy_re(r"#\s(?P<cmd>(?P<word>[\w./-]{1,64})(?:\s.*)?)$")
_PY = lazy_re(r">>>(?:\s(?P<code>.*))?$")
_PY_MORE = lazy_re(r"\.\.\.(?:\s(?P<code>.*))?$")
_IPY = lazy_re(r"In \[\d{1,6}\]:(?:\s(?P<code>.*))?$")
_IPY_MORE = lazy_re(r"\s{3,}\.{3,}:(?:\s(?P<code>.*))?$")
_IPY_OUT = lazy_re(r"Out\[\d{1,6}\]:\s?")
# A prompt-less command line of nvidia-smi or dcgmi (only inside a text that has real prompts).
_BARE_COMMAND = lazy_re(
    r"(?:sudo\s+)?(?:/usr/bin/)?(?:nvidia-smi(?:\s+(?:topo|nvlink|mig|dmon|pmon|drain|clocks|conf-compute)\b|"
    r"(?=\s+-))|dcgmi\s+(?:dmon|diag|health|discovery|stats|group|fieldgroup|nvlink|topo|policy|profile|config|"
    r"introspect)\b)(?:\s+[-\w=.,:/]{1,200}){0,16}\s*$")
_CANDIDATE = lazy_re(r"^(?:\(|\[|\$|#|>>>|In \[|[\w.-]+@|(?:ba|z|k)?sh-\d)", re.M)

# Programs a "# cmd" root prompt may start with (the first word, any directory stripped).
ROOT_COMMANDS = frozenset("""
apt apt-get apt-cache aptitude cat cd chmod chown cp curl dcgmi df dkms dmesg dmidecode dnf docker du echo env
export find free gcc git grep head insmod journalctl kubectl ldconfig ldd less ln lsblk lshw lsinitramfs lsmod
lsof lspci ls make mkinitcpio modinfo modprobe mokutil mount nvcc nvidia-bug-report.sh nvidia-container-cli
nvidia-ctk nvidia-installer nvidia-persistenced nvidia-settings nvidia-smi nvidia-xconfig pacman pip pip3 podman
printenv ps python python3 reboot rmmod rpm sh bash service sudo systemctl tail top uname update-initramfs
dracut which whoami yum zypper ubuntu-drivers lsb_release hostnamectl sysctl strace gdb cuda-gdb conda mamba
torchrun nproc numactl ibstat ibv_devinfo
""".split())


@record
class Block:
    """One command and what it printed; ``command`` is None for text before the first prompt."""

    command: str | None
    output: str
    line: int = 1  # 1-based line of the prompt (or of the first output line)
    language: str = "shell"  # "shell" or "python"


def prompt_command(line: str) -> tuple[str, str] | None:
    """(language, command) when ``line`` is a prompt, else None. An empty prompt gives an empty command."""
    stripped = line.rstrip()
    if len(stripped) > 4096:
        return None
    for pattern in _PROMPTS:
        m = pattern.match(stripped)
        if m:
            return "shell", (m["cmd"] or "").strip()
    m = _ROOT_PROMPT.match(stripped)
    if m and m["word"].rsplit("/", 1)[-1] in ROOT_COMMANDS:
        return "shell", m["cmd"].strip()
    m = _PY.match(stripped) or _IPY.match(stripped)
    if m:
        return "python", (m["code"] or "").strip()
    return None


def _bare_command(line: str) -> tuple[str, str] | None:
    stripped = line.strip()
    if len(stripped) > 600 or not _BARE_COMMAND.match(stripped):
        return None
    return "shell", stripped


def looks_like_session(text: str) -> bool:
    """True when some line of ``text`` is a shell or Python prompt."""
    if len(text) > MAX_SESSION_CHARS:
        return False
    for m in _CANDIDATE.finditer(text):
        end = text.find("\n", m.start())
        if prompt_command(text[m.start(): end if end >= 0 else len(text)]) is not None:
            return True
    return False


def split_session(text: str) -> list[Block]:
    """The blocks of a pasted session; a text without prompts is one block with no command."""
    if not looks_like_session(text):
        return [Block(None, text)]
    blocks: list[Block] = []
    command: str | None = None
    language = "shell"
    start = 1
    output: list[str] = []
    continuing = False  # inside a Python statement's "... " lines
    for number, line in enumerate(text.splitlines(), 1):
        if continuing and language == "python":
            more = _PY_MORE.match(line.rstrip()) or _IPY_MORE.match(line.rstrip())
            if more:
                command = f"{command}\n{(more['code'] or '').strip()}".strip()
                continue
        continuing = False
        found = prompt_command(line) or _bare_command(line)
        if found is None:
            output.append(_IPY_OUT.sub("", line, count=1) if line.startswith("Out[") else line)
            continue
        if command is not None or any(o.strip() for o in output):
            blocks.append(Block(command, "\n".join(output), start, language))
        language, command = found
        start, output, continuing = number, [], True
    if command is not None or any(o.strip() for o in output):
        blocks.append(Block(command, "\n".join(output), start, language))
    return blocks or [Block(None, text)]
