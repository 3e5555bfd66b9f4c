"""States a program's output shows, and the causes they rule out of a symptom's differential.

A line rules a cause out by what it says (``knowledge/rules_out.csv``); a STATE does by what the machine is:
nvidia-smi answering, ``lsmod`` listing nvidia, ``/proc/driver/nvidia/version`` present, ``docker info`` listing the
nvidia runtime, ``ls -l /dev/nvidia*`` listing ``nvidia-uvm``. Each function below reads one state from the snapshot
and says what showed it ("nvidia-smi: lists 2 GPUs, driver 550.54.15"), or None; ``knowledge/states_rule_out.csv``
says which causes each state rules out, why, and from which document. The states are read from
``Snapshot.machine_only()``: a person's words never rule a cause out.

Same host, same moment: analyze reads one host's evidence (one paste, or the files given together), so the states
are read across all of it. Where the moment matters the table says so: a state rules nothing out for a symptom it
contradicts (nvidia-smi answering beside "nvidia-smi cannot talk to the driver" is two moments: before and after a
fix), and a row's ``not_for`` leaves out the symptoms where its cause would concern another GPU or a later moment.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuhealth.model import Snapshot

PROC_VERSION = "/proc/driver/nvidia/version"


def _nvidia_smi_answers(snapshot: Snapshot) -> str | None:
    smi = snapshot.smi
    if smi is None or not (smi.gpus or smi.driver_version):
        return None
    listed = f"lists {len(smi.gpus)} GPU(s)" if smi.gpus and not smi.partial else "answered"
    driver = f", driver {smi.driver_version}" if smi.driver_version else ""
    return f"{snapshot.sources.get('smi', 'nvidia-smi')}: {listed}{driver}"


def _nvml_answers(snapshot: Snapshot) -> str | None:
    nvml = snapshot.nvml
    if nvml is None or not nvml.ok or not nvml.gpus:
        return None
    return f"{snapshot.sources.get('nvml', 'NVML')}: initialised, {len(nvml.gpus)} GPU(s)"


def _proc_driver_version(snapshot: Snapshot) -> str | None:
    """The driver's own version file (live, or pasted), not a version another tool printed."""
    driver = snapshot.driver
    source = snapshot.sources.get("driver", "")
    if driver is None or (PROC_VERSION not in source and snapshot.origin == "evidence" and not driver.banner):
        return None
    return f"{source or PROC_VERSION}: {driver.banner or driver.version}"


def _lsmod_lists_nvidia(snapshot: Snapshot) -> str | None:
    if snapshot.kernel_modules is None or "nvidia" not in snapshot.kernel_modules:
        return None
    return f"{snapshot.sources.get('kernel_modules', 'lsmod')}: the nvidia module is loaded"


def _every_gpu_bound_to_nvidia(snapshot: Snapshot) -> str | None:
    gpus = snapshot.nvidia_pci_gpus
    if not gpus or any(d.kernel_driver != "nvidia" for d in gpus):
        return None
    return (f"{snapshot.sources.get('pci_devices', 'lspci -k')}: {len(gpus)} NVIDIA GPU(s), "
            "each with 'Kernel driver in use: nvidia'")


def _nvidia_smi_lists_every_pci_gpu(snapshot: Snapshot) -> str | None:
    smi, gpus = snapshot.smi, snapshot.nvidia_pci_gpus
    if smi is None or smi.partial or not smi.gpus or not gpus or len(smi.gpus) < len(gpus):
        return None
    return (f"{snapshot.sources.get('smi', 'nvidia-smi')}: {len(smi.gpus)} GPU(s); "
            f"{snapshot.sources.get('pci_devices', 'lspci')}: {len(gpus)} NVIDIA GPU(s)")


def _dev_nvidia_uvm(snapshot: Snapshot) -> str | None:
    if not snapshot.device_nodes or "nvidia-uvm" not in snapshot.device_nodes:
        return None
    return f"{snapshot.sources.get('device_nodes', 'ls -l /dev/nvidia*')}: /dev/nvidia-uvm"


def _dev_nvidia_nodes(snapshot: Snapshot) -> str | None:
    nodes = snapshot.device_nodes or ()
    numbered = [n for n in nodes if n.removeprefix("nvidia").isdigit()]
    if "nvidiactl" not in nodes or not numbered:
        return None
    return f"{snapshot.sources.get('device_nodes', 'ls -l /dev/nvidia*')}: /dev/nvidiactl, /dev/{numbered[0]}"


def _docker_info_nvidia_runtime(snapshot: Snapshot) -> str | None:
    env = snapshot.host_env
    # the daemon's own list (docker info), not daemon.json: a configuration file dockerd has not reloaded says nothing
    if env is None or "nvidia" not in env.docker_runtimes or "docker info" not in (env.docker_runtimes_source or ""):
        return None
    return f"{env.docker_runtimes_source}: Runtimes: {' '.join(env.docker_runtimes)}"


def _cdi_spec_present(snapshot: Snapshot) -> str | None:
    env = snapshot.host_env
    if env is None or not env.cdi_specs:
        return None
    return f"{', '.join(env.cdi_specs)}: present"


STATES: dict[str, Callable[[Snapshot], str | None]] = {
    "nvidia-smi-answers": _nvidia_smi_answers,
    "nvml-answers": _nvml_answers,
    "proc-driver-version": _proc_driver_version,
    "lsmod-lists-nvidia": _lsmod_lists_nvidia,
    "every-gpu-bound-to-nvidia": _every_gpu_bound_to_nvidia,
    "nvidia-smi-lists-every-pci-gpu": _nvidia_smi_lists_every_pci_gpu,
    "dev-nvidia-uvm": _dev_nvidia_uvm,
    "dev-nvidia-nodes": _dev_nvidia_nodes,
    "docker-info-nvidia-runtime": _docker_info_nvidia_runtime,
    "cdi-spec-present": _cdi_spec_present,
}


def held_states(snapshot: Snapshot) -> dict[str, str]:
    """State -> what showed it, for every state the programs' output in ``snapshot`` shows (words left out)."""
    machine = snapshot.machine_only() if snapshot.has_reported else snapshot
    out: dict[str, str] = {}
    for name, read in STATES.items():
        shown = read(machine)
        if shown:
            out[name] = shown
    return out


def contradicted(symptom_id: str, held: dict[str, str]) -> str | None:
    """What shows the machine is not in the state ``symptom_id`` describes (nvidia-smi answering, for "nvidia-smi
    cannot talk to the driver"), or None."""
    from gpuhealth.knowledge.causes import state_exclusions

    return next((held[row.state] for row in state_exclusions()
                 if row.state in held and symptom_id in row.contradicts), None)


def ruled_out(symptom_id: str, held: dict[str, str]) -> dict[str, tuple[object, str]]:
    """Cause id -> (the table's row, what showed its state) for the causes of ``symptom_id`` the held states rule
    out. Nothing for a symptom a held state contradicts: the evidence then holds two moments."""
    from gpuhealth.knowledge.causes import state_exclusions

    if not held or contradicted(symptom_id, held):
        return {}
    out: dict[str, tuple[object, str]] = {}
    for row in state_exclusions():
        if row.state in held and symptom_id not in row.not_for:
            for cause in row.causes:
                out.setdefault(cause, (row, held[row.state]))
    return out
