"""Every command gpuhealth prints uses its tool's real argument forms (issue 22, "What to build" 4: "where a tool exists
in CI, its usage is checked for real").

The commands come from every fix row (knowledge/fixes.csv and the checks' own), every cause's decide and fix, and
every line of the fix scripts of the test hosts and evaluation cases. For each tool installed here, its own ``--help``
says which subcommands and options exist: a ``systemctl`` verb, an ``apt-get``/``apt-mark`` command, a ``modprobe``,
``dkms`` or ``mokutil`` option that the tool does not list fails the test. ``apt-get --help`` lists few options, so
apt-get's options go to apt-get itself, simulating an install of nothing (``apt-get -s OPTIONS install``: offline, no
package looked up), which refuses an option it does not know. A tool that is not installed is skipped, saying so
(``.ci/run`` installs dkms and mokutil, where the distribution has them). Nothing else is run.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from functools import cache

import pytest

from fixture_scripts import all_scripts
from gpuhealth.knowledge import table_rows
from gpuhealth.knowledge.fixes import check_fixes

# the tools checked, and whether their first word after the options is a command (systemctl enable, apt-get install)
TOOLS = {"systemctl": True, "apt-get": True, "apt-mark": True, "modprobe": False, "dkms": True, "mokutil": False}
# words that end one command in a line: a pipeline, a list, a redirection
_SEPARATORS = {"|", "||", "&&", ";", "&"}


def commands() -> list[str]:
    found = [f.command for fixes in check_fixes().values() for f in fixes if f.is_command]
    found += [row.get(key) or "" for row in table_rows("causes.csv") for key in ("decide", "fix")]
    for script in all_scripts().values():
        found += [line[2:] if line.startswith("# sudo ") else line for line in script.splitlines()
                  if not line.startswith("#") or line.startswith("# sudo ")]
    return sorted({c for c in found if c.strip()})


def invocations(tool: str) -> list[tuple[str, list[str]]]:
    """(the command, the words after ``tool``) for each time ``tool`` runs in a printed command."""
    out = []
    for command in commands():
        text = re.sub(r"\$\([^()]*\)", "X", command)  # $(uname -r) is one word
        text = re.sub(r"<[^<>]*>", "X", text)  # a placeholder to fill in
        try:
            words = shlex.split(re.sub(r"(\|\||&&|[|;&])", r" \1 ", text))
        except ValueError:
            continue
        for i, word in enumerate(words):
            if word == tool and (i == 0 or words[i - 1] in {"sudo", *_SEPARATORS}):
                args = []
                for arg in words[i + 1:]:
                    if arg in _SEPARATORS or arg.startswith((">", "2>")):
                        break
                    args.append(arg)
                out.append((command, args))
    return out


@cache
def help_text(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed here: its argument forms were not checked (.ci/run installs it)")
    result = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
    text = result.stdout + result.stderr
    if tool == "mokutil" and "--import" not in text:
        # mokutil prints only "EFI variables are not supported on this system" without EFI: its manual page lists
        # the same options (mokutil(1), installed with it)
        import gzip
        from pathlib import Path

        manual = Path("/usr/share/man/man1/mokutil.1.gz")
        if not manual.is_file():
            pytest.skip("mokutil says nothing without EFI and its manual page is not installed: not checked")
        text = gzip.decompress(manual.read_bytes()).decode("utf-8", "replace").replace("\\-", "-")
    return text


def _apt_get_accepts(options: list[str], command: str) -> None:
    """apt-get parses ``options`` (``-s ... install`` of no package: it reads the local package state, nothing more)."""
    if not options:
        return
    result = subprocess.run([shutil.which("apt-get") or "apt-get", "-s", *options, "install"], capture_output=True,
                            text=True, timeout=60)
    assert "not understood" not in result.stderr and "Invalid" not in result.stderr, f"{command}: {result.stderr}"


def _listed(option: str, text: str) -> bool:
    name = option.split("=", 1)[0]
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_option_and_command_is_one_the_tool_lists(tool):
    used = invocations(tool)
    if not used:
        pytest.skip(f"no printed command runs {tool}")
    text = help_text(tool)
    for command, args in used:
        options = [a for a in args if a.startswith("-") and a != "-"]
        if tool == "apt-get":
            _apt_get_accepts(options, command)
            options = []
        for option in options:
            assert _listed(option, text), f"{tool} --help does not list {option}: {command}"
        if TOOLS[tool]:
            verb = next((a for a in args if not a.startswith("-")), None)
            assert verb is None or verb == "X" or _listed(verb, text), f"{tool} has no command {verb}: {command}"


def test_the_commands_use_the_tools():
    """The walk finds the tools where the fixes use them, so the test above checks something."""
    for tool in ("systemctl", "modprobe", "apt-get", "apt-mark", "dkms", "mokutil"):
        assert invocations(tool), tool


def test_a_wrong_option_fails_the_check():
    text = "  -a, --all   Consider every non-argument\n  -r, --remove  Remove modules\n"
    assert _listed("-a", text) and _listed("--remove", text)
    assert not _listed("--al", text) and not _listed("-x", text) and not _listed("--remove-all", text)
