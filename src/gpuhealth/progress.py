"""Life signs for a live `check`: a spinner on stderr naming the step being waited for, shown once a step has
taken over a second (the framework probe and `--level 2` can take up to a minute), and only when stdout and
stderr are both a terminal. Piped or redirected, nothing is drawn and rich is not imported for it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

SHOW_AFTER_S = 1.0

# What a probe does, as the spinner says it (collect's probe function names, without "probe_")
STEPS = {
    "os": "reading the OS and kernel",
    "pci": "listing the PCI bus",
    "driver": "reading the driver's version",
    "modules": "listing kernel modules",
    "device_nodes": "listing /dev/nvidia*",
    "nvidia_smi": "running nvidia-smi",
    "nvml": "asking NVML",
    "topology": "reading the GPU topology",
    "kernel_log": "reading the kernel log",
    "environment": "reading the environment",
    "install": "reading how the driver was installed",
    "cuda": "probing PyTorch, JAX, CuPy and TensorFlow on each GPU",
    "cuda_without_frameworks": "looking for CUDA toolkits",
    "host_environment": "looking for containers and the NVIDIA Container Toolkit",
}


class Step(Protocol):
    def __call__(self, text: str) -> None: ...


def describe(probe: str) -> str:
    name = probe.removeprefix("probe_")
    return STEPS.get(name, name.replace("_", " "))


class Spinner:
    """Says each step; the spinner appears once one step has lasted SHOW_AFTER_S, then follows the steps."""

    def __init__(self, console: Any, show_after: float = SHOW_AFTER_S) -> None:
        self.console, self.show_after = console, show_after
        self._lock = threading.Lock()
        self._text = ""
        self._status: Any = None
        self._timer: threading.Timer | None = None
        self._closed = False

    def __call__(self, text: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._text = text
            if self._status is not None:
                self._status.update(text)
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.show_after, self._show, (text,))
            self._timer.daemon = True
            self._timer.start()

    def _show(self, text: str) -> None:
        with self._lock:
            if self._closed or self._status is not None or self._text != text:
                return  # done, or another step began (its own timer runs)
            self._status = self.console.status(text, spinner="dots")
            self._status.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self._status is not None:
                self._status.stop()  # transient: the line is cleared before the report prints


@contextmanager
def live_steps() -> Iterator[Step]:
    """A callable taking the current step's text: a Spinner on a terminal, else one that does nothing."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        yield lambda text: None
        return
    from gpuhealth import inert

    spinner = Spinner(inert.console(stderr=True))
    try:
        yield spinner
    finally:
        spinner.close()
