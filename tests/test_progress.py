"""Live `check` shows life signs on a terminal: a spinner on stderr naming the step it waits for, once a step
has taken over a second, and nothing at all when piped (rich's spinner not even imported). The probes are
fakes here (nothing of this host is read); one of them takes 1.5 s, as a hung nvidia-smi or the framework
probe does for longer."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time

from rich.console import Console

from conftest import REPO
from gpuhealth.progress import STEPS, Spinner, describe

# A live `check` whose probes all answer at once with nothing, except the kernel log's, which takes 1.5 s.
SCRIPT = """
import sys, time
import gpuhealth.collect as collect
from gpuhealth.collect.base import Probed

def fake(name, delay=0.0):
    def probe(host, timeout):
        time.sleep(delay)
        return Probed()
    probe.__name__ = name
    return probe

for name in [n for n in vars(collect) if n.startswith("probe_")]:
    setattr(collect, name, fake(name, 1.5 if name == "probe_kernel_log" else 0.0))
from gpuhealth.cli import main
try:
    main(["check", "--no-frameworks", "--format", "json"])
except SystemExit:
    pass
print("RICH-STATUS-LOADED" if "rich.status" in sys.modules else "RICH-STATUS-NOT-LOADED", file=sys.stderr)
"""


def test_every_probe_has_a_worded_step():
    import gpuhealth.collect as collect

    probes = [n.removeprefix("probe_") for n in vars(collect) if n.startswith("probe_")]
    assert probes and set(probes) <= set(STEPS)
    assert describe("probe_kernel_log") == "reading the kernel log"


def test_a_step_shows_only_after_a_second():
    out = io.StringIO()
    spinner = Spinner(Console(file=out, force_terminal=True, width=80), show_after=0.3)
    spinner("quick step")
    time.sleep(0.1)
    spinner("slow step")
    time.sleep(0.6)
    spinner("next step")
    time.sleep(0.3)
    spinner.close()
    shown = out.getvalue()
    assert "quick step" not in shown  # done before its second was up
    assert "slow step" in shown and "next step" in shown  # once shown, it follows the steps


def _in_a_terminal(timeout: float = 60) -> str:
    """SCRIPT's stdout and stderr as a terminal shows them."""
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=follower, stdout=follower, stderr=follower,
                             cwd=REPO, close_fds=True)
    os.close(follower)
    seen, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif child.poll() is not None:
            break
    child.wait(10)
    os.close(leader)
    return seen.decode("utf-8", "replace")


def test_live_check_on_a_terminal_names_the_slow_step():
    shown = _in_a_terminal()
    assert "reading the kernel log" in shown and "RICH-STATUS-LOADED" in shown
    assert '"verdict"' in shown  # the report follows


def test_live_check_piped_draws_nothing_and_loads_no_spinner():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert '"verdict"' in run.stdout
    assert run.stderr.strip() == "RICH-STATUS-NOT-LOADED"
