"""Run a generated fix script with every external command replaced by a recording stub.

The script runs under the real bash with ``PATH`` holding only a temporary folder of stubs and no other
variable set (``set -u`` then aborts on any unset variable the script reads). Each stub writes its argv to a
log (a file per call) and exits 0, after reading its standard input to the end (so a writer in a pipeline never
gets SIGPIPE).
``sudo``'s stub records itself, then runs its arguments through the stubs. A command with no stub (an
attacker's ``touch``, ``curl`` ...) is recorded all the same by bash's ``command_not_found_handle``, defined
in the ``BASH_ENV`` file every bash reads at start. So is ``test``, which the verification lines use on files
(``test -s /etc/modprobe.d/...``): defined as a function it checks no real file and passes.

So nothing the script runs touches this machine, and the log says exactly which commands ran with which
arguments, in order: the injection tests assert that no attacker command ran and that no attacker text
reached an argument; the ``set -u`` test, that every script of the test hosts runs to its end.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpuhealth.model import SHELL_PROGRAMS

BASH = shutil.which("bash") or "/bin/bash"
FINAL_LINE = "gpuhealth fix script: all steps done"
# A live redirection into a file would write this machine (the tests may run as root): refused before running.
_WRITES_A_FILE = re.compile(r"(?<![0-9&])>{1,2}\s*(?!/dev/null\b|&)\S")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    calls: list[list[str]]  # the argv of every command that ran, its name first, in order

    @property
    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def arguments(self) -> list[str]:
        return [arg for call in self.calls for arg in call[1:]]

    def __str__(self) -> str:  # what a failed assertion shows
        return f"exit {self.returncode}\nstderr: {self.stderr[-2000:]}\ncalls: {self.calls}"


def _recorder(log: Path, stubs: Path) -> str:
    return f"""#!{BASH}
name=${{STUB_NAME:-${{0##*/}}}}
unset STUB_NAME
# one file per call, named by the time it ran: stages of a pipeline write at once, and never into each other
printf '%s\\0' "$name" "$@" > {shlex.quote(str(log))}/"$EPOCHREALTIME-$$"
if [[ $name == sudo ]]; then
    (( $# )) || exit 0
    if [[ $1 != */* && -x {shlex.quote(str(stubs))}/$1 ]]; then
        exec {shlex.quote(str(stubs))}/"$1" "${{@:2}}"
    fi
    STUB_NAME=$1 exec {shlex.quote(str(stubs / "_record"))} "${{@:2}}"
fi
while IFS= read -r _line || [[ -n $_line ]]; do :; done
exit 0
"""


def _bash_env(stubs: Path) -> str:
    record = shlex.quote(str(stubs / "_record"))
    return f"""command_not_found_handle() {{ STUB_NAME=$1 {record} "${{@:2}}"; }}
test() {{ STUB_NAME=test {record} "$@" </dev/null; }}
"""


def _calls(log: Path) -> list[list[str]]:
    def when(path: Path) -> tuple[float, int]:
        moment, _, pid = path.name.partition("-")
        return float(moment), int(pid)

    return [[field.decode("utf-8", "replace") for field in path.read_bytes().split(b"\0")[:-1]]
            for path in sorted(log.iterdir(), key=when)]


def live_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_stubbed(script: str, folder: Path, timeout: float = 30.0) -> Run:
    """Run ``script`` in ``folder`` with recording stubs for every external command and no variable but PATH."""
    for line in live_lines(script):
        assert not _WRITES_A_FILE.search(line), f"the script writes a file; not run here: {line}"
    stubs, log = folder / "stubs", folder / "calls"
    stubs.mkdir(parents=True)
    log.mkdir()
    recorder = stubs / "_record"
    recorder.write_text(_recorder(log, stubs))
    recorder.chmod(0o755)
    for name in SHELL_PROGRAMS - {"test", "echo", "printf", "export", "unset", "for", "time", "kill"}:
        (stubs / name).symlink_to(recorder)
    bash_env = folder / "bash_env"
    bash_env.write_text(_bash_env(stubs))
    path = folder / "fix.sh"
    path.write_text(script)
    result = subprocess.run([BASH, str(path)], cwd=folder, env={"PATH": str(stubs), "BASH_ENV": str(bash_env)},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    return Run(result.returncode, result.stdout, result.stderr, _calls(log))


def ran_to_its_end(run: Run, script: str) -> bool:
    """Exit 0 after the script's last line (or its early ``exit 0`` when it has nothing to do)."""
    return run.returncode == 0 and (FINAL_LINE in run.stdout or "# Nothing to do" in script)
