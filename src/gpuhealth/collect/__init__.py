"""Collection: ask a ``Host`` for evidence and freeze it into a ``Snapshot``.

Each probe is a small function ``(host, timeout) -> Probed`` returning the snapshot fields it found,
plus *why* any evidence is missing. Probes are independent, so they run in parallel: nvidia-smi, NVML,
the kernel log and the PyTorch probe are the slow ones, and a hung nvidia-smi must not delay the rest.
The probes live by subject: ``system``, ``gpu``, ``install``, ``cuda``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator

from gpuhealth.collect.base import Probed, in_parallel
from gpuhealth.collect.containers import probe_host_environment
from gpuhealth.collect.cuda import probe_cuda, probe_cuda_without_frameworks
from gpuhealth.collect.gpu import probe_driver, probe_nvidia_smi, probe_nvml, probe_pci, probe_topology
from gpuhealth.collect.hostside import host_health_probe
from gpuhealth.collect.install import probe_install
from gpuhealth.collect.system import (
    probe_device_nodes,
    probe_environment,
    probe_kernel_log,
    probe_modules,
    probe_os,
)
from gpuhealth.host import DEFAULT_TIMEOUT_S, Host
from gpuhealth.model import Snapshot


class CollectError(Exception):
    """A probe failed on evidence it could not handle; the message names the file (bundles) or the probe."""


def _brief(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


def collect(host: Host, timeout: float = DEFAULT_TIMEOUT_S, origin: str = "live",
            captured_at: str | None = None,
            progress: Callable[[str], None] | None = None, frameworks: bool = True,
            probe_timeout: float | None = None, waiting: Callable[[str], None] | None = None,
            ib_exclude: Collection[str] = ()) -> Snapshot:
    """Run every probe against ``host`` and return the frozen snapshot.

    ``frameworks=False`` skips the PyTorch probe, which opens a CUDA context and computes on every
    GPU: right for a one-off check, wrong for a periodic one on a node running jobs. ``probe_timeout``
    bounds that probe (default: ``probe_cuda``'s, at least 60 s). ``progress`` hears each probe's name once
    it is done, ``waiting`` the name of the probe whose result is awaited next. ``ib_exclude``: InfiniBand
    devices that must not be read (``[check] ib_exclude``).
    """
    probes: list[Callable[[Host, float], Probed]] = [
        probe_os, probe_pci, probe_driver, probe_modules, probe_device_nodes,
        probe_nvidia_smi, probe_nvml, probe_topology, probe_kernel_log, probe_environment, probe_install,
        _cuda_probe(frameworks, probe_timeout),
        probe_host_environment, host_health_probe(ib_exclude),
    ]
    merged = Probed()
    for name, found in _probe_all(host, timeout, probes, waiting):
        merged.fields.update(found.fields)
        merged.unavailable.update(found.unavailable)
        merged.sources.update(found.sources)
        if progress:
            progress(name.removeprefix("probe_"))
    return Snapshot(
        origin=origin,
        # A replayed host answers as of its capture: date-dependent checks judge a bundle the same forever.
        captured_at=captured_at or getattr(host, "captured_at", None) or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        unavailable=merged.unavailable,
        sources=merged.sources,
        **merged.fields,
    )


Probe = Callable[[Host, float], Probed]


def _cuda_probe(frameworks: bool, probe_timeout: float | None) -> Probe:
    """``probe_cuda`` as a probe: without the PyTorch probe, or with its own deadline."""
    if not frameworks:
        return probe_cuda_without_frameworks
    if probe_timeout is None:
        return probe_cuda

    def bounded(host: Host, timeout: float) -> Probed:
        return probe_cuda(host, timeout, probe_timeout=probe_timeout)

    bounded.__name__ = probe_cuda.__name__  # the name a failure report gives
    return bounded


def _probe_all(host: Host, timeout: float, probes: list[Probe],
               waiting: Callable[[str], None] | None = None) -> Iterator[tuple[str, Probed]]:
    """Each probe's name and result, in order; in threads on a live host (see ``base.in_parallel``)."""
    waiting = waiting or (lambda name: None)
    if not in_parallel(host):
        for probe in probes:
            waiting(probe.__name__)
            try:
                found = probe(host, timeout)
            except Exception as exc:
                raise _failed(host, probe.__name__, exc) from exc
            yield probe.__name__, found
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="gpuhealth-probe") as pool:
        futures = {pool.submit(probe, host, timeout): probe.__name__ for probe in probes}
        for future, name in futures.items():
            waiting(name)
            try:
                found = future.result()  # probes do not raise for trouble on the host: it is in unavailable
            except Exception as exc:  # evidence the probe could not handle: a malformed bundle, a bug
                raise _failed(host, name, exc) from exc
            yield name, found


def _failed(host: Host, name: str, exc: Exception) -> CollectError:
    where = getattr(host, "evidence_of", lambda probe: None)(name) or name
    return CollectError(f"{where}: {type(exc).__name__}: {_brief(exc)}")
