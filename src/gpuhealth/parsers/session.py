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

Flattened sessions. A paste that went through a mail archive, a forum or a chat often lost its newlines: a
whole session on one line (``cat /proc/version Linux version 4.4.0-34-generic (buildd@lgw01) ... #53-Ubuntu
SMP ... gcc --version gcc (Ubuntu 5.4.0-6ubuntu1~16.04.1) 5.4.0 20160609``). Given ``accepts(command,
output)`` (the caller's judge of whether ``output`` is what ``command`` prints: the evidence registry's), such
a line is split back into its blocks. A command is a known program's name at a word boundary, then up to
eight words that can be arguments (no parentheses, no trailing colon); its output runs to the next
command. A split is made only where ``accepts`` takes the output for that command's (the longest such
command wins, and the output may not start with an option or a pipe, which would belong to the command).
Once a line holds one such proven block, a known program followed by options or paths (``lsb_release -rd``), or
any known program after a prompt, ends the output before it; what follows such a plain command is a block without
a command (its output, unproven, may be several lines run together, which its command's reader would misread).
Prose that names commands ("run nvidia-smi and lspci") is never split: "and lspci" is not what nvidia-smi
prints. Bounded: lines up to ``MAX_FLAT_LINE`` characters, ``MAX_FLAT_CANDIDATES``
names a line, ``MAX_FLAT_CHECKS`` judgements a text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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

# ------------------------------------------------------------------------------------------ flattened sessions
Accepts = Callable[[str, str], bool]
MAX_FLAT_LINE = 256 * 1024  # longer lines are data, not a paste: never searched for commands
MAX_FLAT_CANDIDATES = 64  # program names tried per line
MAX_FLAT_CHECKS = 2000  # accepts() calls per text
_MAX_COMMAND_WORDS = 8  # words after the program's name a flattened command may have
_OUTPUT_HEAD = 4096  # characters of an output given to accepts(): the registry's sniffs read the head
# Programs whose command lines the registry reads, beyond the root-prompt list.
_FLAT_PROGRAMS = ROOT_COMMANDS | frozenset("""
dpkg-query zcat more locate bat printenv declare jockey-text uv micromamba collect_env cc g++ clang
""".split())
# Programs whose name is a common word or is used in prose ("make sure", "find the", "free memory") or that
# print what the registry does not read: they split a flattened line only when their output is recognised.
_PROSE_PROGRAMS = frozenset("""
cd echo export make find head tail less more free top env sh bash service reboot sudo which whoami ln cp mount
git curl du df chmod chown grep cat ps time
""".split())
# A program's name where a command can start: at a word boundary, not inside a pipeline ("| grep"), with
# sudo and a directory allowed before it; a compiler under its target's name (x86_64-linux-gnu-gcc-12).
_FLAT_CANDIDATE = lazy_re(
    r"(?<!\S)(?<![|&;]\s)(?:sudo\s{1,4}(?:-\S{1,20}\s{1,4}){0,3})?(?:(?:/[\w.-]{1,64}){0,6}/)?"
    r"(?P<word>(?:[\w.]{1,40}-){0,4}g?cc(?:-\d{1,3}(?:\.\d{1,3}){0,2})?|"
    + "|".join(re.escape(w) for w in sorted(_FLAT_PROGRAMS, key=len, reverse=True)) + r")(?=[ \t])")
_TOKEN = lazy_re(r"\S{1,400}")


def _names_a_program(text: str) -> bool:
    """A cheap first look for _FLAT_CANDIDATE (whose search costs ~13 ms on a 73 KB `nvidia-smi -q`): some
    whitespace-separated word, past its directory, is a listed program or a compiler's name. Every word the pattern
    finds is such a word, so a text without one cannot hold a flattened command. Each distinct word is looked at once
    (an `nvidia-smi -q` repeats its few hundred words for every GPU)."""
    for word in set(text.split()):
        name = word.rsplit("/", 1)[-1]
        if name in _FLAT_PROGRAMS or name.endswith("cc") or "cc-" in name:
            return True
    return False
_ARGUMENT = lazy_re(r"[^\s()]{0,199}[^\s(),:]$")  # a word a command may hold (one ending in ":" or "," is output's)
_OPTION_OR_PATH = lazy_re(r"(?:-{1,2}[\w][\w.=,:/-]{0,100}|[~.]?/[\w./*{},+-]{0,200})$")
_JOINER = frozenset({"|", "||", "&&", ";", ">", ">>", "2>&1", "2>", "&>", "|&", "<"})
# A prompt just before a command in a flattened line: "$", "#", "user@host:~$", "[root@host ~]#", "(venv) $".
_PROMPT_TAIL = lazy_re(r"(?:^|\s)(?:(?:\([^()\s]{1,64}\)\s{0,4})?(?:[\w.-]{1,64}@[\w.-]{1,64}(?::\S{0,100})?\s?"
                       r"[$#%]|\[[\w.-]{1,64}@[^\]\n]{1,100}\][$#])|[$#])\s{0,8}$")


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


def split_session(text: str, accepts: Accepts | None = None) -> list[Block]:
    """The blocks of a pasted session; a text without prompts is one block with no command.

    With ``accepts`` (see the module docstring), a line that holds a flattened session becomes its blocks too;
    the lines after it start a block of their own."""
    session = looks_like_session(text)
    flat = (accepts is not None and len(text) <= MAX_SESSION_CHARS and _names_a_program(text)
            and _FLAT_CANDIDATE.search(text) is not None)
    if not session and not flat:
        return [Block(None, text)]
    blocks: list[Block] = []
    command: str | None = None
    language = "shell"
    start = 1
    output: list[str] = []
    continuing = False  # inside a Python statement's "... " lines
    checks = [MAX_FLAT_CHECKS]
    split_flat = False
    for number, line in enumerate(text.splitlines(), 1):
        if continuing and language == "python":
            more = _PY_MORE.match(line.rstrip()) or _IPY_MORE.match(line.rstrip())
            if more:
                command = f"{command}\n{(more['code'] or '').strip()}".strip()
                continue
        continuing = False
        parts = _flattened(line, accepts, checks, prompt_command(line) is not None) if flat and accepts else None
        if parts:
            if command is not None or any(o.strip() for o in output):
                blocks.append(Block(command, "\n".join(output), start, language))
            blocks.extend(Block(c, o, number) for c, o in parts)
            command, language, start, output, split_flat = None, "shell", number + 1, [], True
            continue
        found = prompt_command(line) or (_bare_command(line) if session else None)
        if found is None:
            output.append(_IPY_OUT.sub("", line, count=1) if line.startswith("Out[") else line)
            continue
        if command is not None or any(o.strip() for o in output):
            blocks.append(Block(command, "\n".join(output), start, language))
        language, command = found
        start, output, continuing = number, [], True
    if not session and not split_flat:
        return [Block(None, text)]
    if command is not None or any(o.strip() for o in output):
        blocks.append(Block(command, "\n".join(output), start, language))
    return blocks or [Block(None, text)]


def _flattened(line: str, accepts: Accepts, checks: list[int], prompted: bool = False
               ) -> list[tuple[str | None, str]] | None:
    """The (command, output) blocks of a line that holds a flattened session, or None (see the module docstring).
    ``checks``: the accepts() calls left for the whole text; ``prompted``: the line starts with a prompt."""
    if len(line) > MAX_FLAT_LINE or checks[0] <= 0:
        return None
    names = []
    for m in _FLAT_CANDIDATE.finditer(line):
        names.append(m)
        if len(names) >= MAX_FLAT_CANDIDATES:
            break
    # Right to left: a name is a boundary when its command is proven (or plain: options and paths); the output of
    # the name before it runs to that boundary, never to a name that begins no command ("gcc (Ubuntu ...").
    proven: dict[int, int] = {}  # a name's start -> the end of its command, where its output is recognised
    plain: dict[int, int] = {}  # the same for a known program followed by options or paths only
    limit = len(line)
    for m in reversed(names):
        end = _proven_command(line, m.start(), m.end("word"), limit, accepts, checks)
        if end is not None:
            proven[m.start()] = end
        else:
            # after a prompt ("... $ lsmod | grep nvidia nvidia_uvm 1437696 0 ..."), any known program starts one
            typed = _PROMPT_TAIL.search(line, max(0, m.start() - 300), m.start()) is not None
            if typed or m["word"] not in _PROSE_PROGRAMS:
                end = _plain_command(line, m.end("word"), limit, bare=typed)
                if end is not None:
                    plain[m.start()] = end
        if end is not None:
            limit = m.start()
    if not proven:
        return None
    kept: list[tuple[int, int]] = []
    for at, end in sorted({**plain, **proven}.items()):
        if kept and at < kept[-1][1]:
            continue  # a name inside the previous command's words
        kept.append((at, end))
    parts: list[tuple[str | None, str]] = []
    before = _without_prompt(line[:kept[0][0]]).strip()
    if before:
        parts.append((None, before))
    for i, (at, end) in enumerate(kept):
        output = _output(_without_prompt(line[end:kept[i + 1][0]]) if i + 1 < len(kept) else line[end:])
        if at in proven:
            parts.append((line[at:end].strip(), output))
        else:  # a plain command only ends the output before it: what follows it, unproven, is not read as its output
            parts.append((None, f"{line[at:end].strip()} {output}".strip()))
    if prompted and len(kept) < 2:
        return None  # "$ dmesg | grep NVRM" is a command line: a prompt line holds a flattened session of two or more
    return parts


def _command_words(line: str, name_end: int, limit: int) -> list[re.Match[str]]:
    """The words after a program's name that may still belong to its command line (a ``#`` starts a comment)."""
    words: list[re.Match[str]] = []
    for m in _TOKEN.finditer(line, name_end, limit):
        if len(words) >= _MAX_COMMAND_WORDS or m[0].startswith("#") or not _ARGUMENT.match(m[0]):
            break
        words.append(m)
    return words


def _output_may_start(line: str, end: int, limit: int) -> bool:
    """Whether the text after a command can be its output: something, and not an option or a pipe, which would
    still be the command's."""
    m = _TOKEN.search(line, end, limit)
    return m is not None and not m[0].startswith("-") and m[0] not in _JOINER


def _output(text: str) -> str:
    """A flattened command's output; ``cmd # output`` (a write-up's comment holding what the command printed) gives
    the comment's text."""
    text = text.strip()
    return text[1:].lstrip() if text.startswith("# ") else text


def _proven_command(line: str, at: int, name_end: int, limit: int, accepts: Accepts, checks: list[int]
                    ) -> int | None:
    """The end of the longest command starting at ``at`` whose output (to ``limit``) ``accepts`` takes, or None.
    A command never ends at a pipe or at the program right after one (``dmesg | grep`` still needs its pattern)."""
    words = _command_words(line, name_end, limit)
    ends = [w.end() for k, w in enumerate(words)
            if w[0] not in _JOINER and not (k and words[k - 1][0] in _JOINER)]
    for end in [*reversed(ends), name_end]:
        if not _output_may_start(line, end, limit) or checks[0] <= 0:
            continue
        checks[0] -= 1
        head = line[end:limit] if limit - end <= _OUTPUT_HEAD else line[end:end + _OUTPUT_HEAD]
        if accepts(line[at:end].strip(), _output(_without_prompt(head) if limit - end <= _OUTPUT_HEAD else head)):
            return end
    return None


def _plain_command(line: str, name_end: int, limit: int, bare: bool = False) -> int | None:
    """The end of a known program's command line of options and paths (``lsb_release -rd``), with pipes to other
    programs and one word each of those may take (``lsmod | grep nvidia``), or None. ``bare``: the program's name
    alone is a command too (after a prompt)."""
    end = name_end if bare else None
    expect = "args"  # options and paths; after a pipe: the "program", then its "pattern" (one bare word), then args
    for word in _command_words(line, name_end, limit):
        token = word[0]
        if token in _JOINER:
            expect = "program"
            continue
        if expect == "program":
            expect = "pattern"
        elif _OPTION_OR_PATH.match(token):
            pass
        elif expect == "pattern" and not token[:1].isdigit():
            expect = "args"
        else:
            break
        end = word.end()
    return end if end is not None and _output_may_start(line, end, limit) else None


def _without_prompt(text: str) -> str:
    """``text`` without a shell prompt at its end (the prompt of the next flattened command)."""
    tail_from = max(0, len(text) - 300)
    m = _PROMPT_TAIL.search(text, tail_from)
    return text[:m.start()] if m else text


MAX_PROMPTLESS_LINES = 20_000  # lines of a prompt-less text searched for command lines
MAX_PROMPTLESS_COMMANDS = 64  # command lines judged per text


def with_prompts(text: str, accepts: Accepts) -> str:
    """A text of commands and their output pasted without prompts (a fenced block in an issue: ``nvidia-smi`` then
    its table), with ``$ `` put before each line that is a known program's whole command line and whose following
    lines, up to the next such command, ``accepts`` takes for its output. A text that has prompts, or in which no
    command is proven, comes back unchanged. Right to left, as in a flattened line: an unproven command line stays
    in the output of the one before it."""
    if len(text) > MAX_SESSION_CHARS or looks_like_session(text):
        return text
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines[:MAX_PROMPTLESS_LINES]) if _whole_command(line)]
    proven: list[int] = []
    limit = len(lines)
    for i in reversed(heads[:MAX_PROMPTLESS_COMMANDS]):
        output = "\n".join(lines[i + 1:min(limit, i + 1 + 200)])
        if output.strip() and accepts(lines[i].strip(), output[:_OUTPUT_HEAD]):
            proven.append(i)
            limit = i
    if not proven:
        return text
    for i in proven:
        lines[i] = "$ " + lines[i].strip()
    return "\n".join(lines)


def _whole_command(line: str) -> bool:
    """Whether ``line`` is a known program's command line and nothing else (its words can all be arguments)."""
    stripped = line.strip()
    if not stripped or len(stripped) > 600:
        return False
    m = _FLAT_CANDIDATE.match(stripped + " ")
    if m is None:
        return False
    words = _command_words(stripped, m.end("word"), len(stripped))
    return (words[-1].end() if words else m.end("word")) == len(stripped)
