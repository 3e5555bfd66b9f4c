"""A person's sentences as evidence: the versions, unit states, PCIe links and packages they state fill the snapshot
fields a program's output would fill (``parsers/prose.py`` reads them), each marked as a ``ReportedFact``.

Machine output wins: a fact fills a field only where no program's output in the same evidence gave it, and it is
applied after every piece is read, so the order of the pieces does not matter. The checks judge the filled fields
as they judge a program's output; checks/engine.py keeps what rests on the words alone below critical.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuhealth.model import (
    CudaState,
    DriverInfo,
    Gpu,
    HostEnvironment,
    InstalledKernel,
    InstallState,
    NvidiaPackage,
    OsInfo,
    ReportedFact,
    SmiReport,
    TorchEnv,
)
from gpuhealth.records import record


@record
class Statement:
    """One thing a piece's sentences state (a ``parsers.prose`` record) and the piece it was read from."""

    stated: Any  # Stated, UnitStatement or PcieStatement
    source: str


def statements(text: str, source: str) -> list[Statement]:
    """What the sentences of one piece state: versions, NVIDIA units, install-time states, PCIe links."""
    from gpuhealth.parsers.prose import (
        gpu_count_statements,
        install_statements,
        library_path_statements,
        package_statements,
        pcie_statements,
        unit_statements,
        version_statements,
    )

    found = [*version_statements(text), *unit_statements(text), *install_statements(text), *package_statements(text),
             *library_path_statements(text), *gpu_count_statements(text)]
    pcie = pcie_statements(text)
    if pcie:
        found += with_model(text, pcie)
    return [Statement(s, source) for s in found]


def fill_reported(fields: dict[str, Any], given: list[Statement]) -> tuple[ReportedFact, ...]:
    """Lay what the words state over ``fields`` (the snapshot fields the pieces' parsers filled) where no program's
    output gave it; the facts say which fields they filled. Of two pieces stating one thing, the later wins."""
    from gpuhealth.parsers.prose import InstallStatement, LibraryPathStatement, PackageStatement, Stated, UnitStatement

    latest: dict[str, Statement] = {}
    for statement in given:
        stated = statement.stated
        key = (stated.thing if isinstance(stated, Stated) else f"package:{stated.name}"
               if isinstance(stated, PackageStatement) else f"unit:{stated.unit}"
               if isinstance(stated, UnitStatement) else f"install:{stated.fact}:{stated.subject}"
               if isinstance(stated, InstallStatement) else "ld_library_path"
               if isinstance(stated, LibraryPathStatement) else "pcie")  # a link (evidence/prose_pcie.py)
        latest[key] = statement
    modules = [s for s in latest.values() if isinstance(s.stated, InstallStatement) and s.stated.fact == "module"]
    kernels = [s for s in latest.values() if isinstance(s.stated, InstallStatement)
               and s.stated.fact == "kernel-module"]
    packages = [s for s in latest.values() if isinstance(s.stated, PackageStatement)]
    facts: list[ReportedFact] = [*_modules(fields, modules), *_kernel_modules(fields, kernels),
                                 *fill_packages(fields, packages)]
    for statement in latest.values():
        stated = statement.stated
        if isinstance(stated, PackageStatement):
            continue
        if isinstance(stated, Stated):
            facts += _version(fields, stated, statement.source)
        elif isinstance(stated, UnitStatement):
            facts += _unit(fields, stated, statement.source)
        elif isinstance(stated, InstallStatement):
            facts += fill_install(fields, stated, statement.source)
        elif isinstance(stated, LibraryPathStatement):
            facts += _library_path(fields, stated, statement.source)
        else:
            facts += fill_pcie(fields, stated, statement.source)
    return tuple(facts)


def _set(fields: dict[str, Any], key: str, kind: type, values: dict[str, Any], what: str, words: str,
         source: str) -> ReportedFact:
    """Set ``values`` in ``fields[key]`` (made as ``kind`` when absent); the fact that says so."""
    current = fields.get(key)
    if current is None:
        fields[key] = kind(**values)
        return ReportedFact(key, (), what, words, source)
    fields[key] = replace(current, **values)
    return ReportedFact(key, tuple(values), what, words, source)


def _machine_driver(fields: dict[str, Any]) -> bool:
    """Whether a program's output in the evidence names the driver's version."""
    smi, nvml, torch, install = (fields.get(k) for k in ("smi", "nvml", "torch", "install"))
    driver = fields.get("driver")
    return bool((driver and driver.version) or (smi and smi.driver_version) or (nvml and getattr(nvml, "driver_version",
                None)) or (torch and torch.driver_version) or (install and install.module_version)
                or any(g.driver_version for g in (smi.gpus if smi else ())))


def _version(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    words, value = stated.words, stated.value
    if stated.thing == "gpu-count":
        return _gpu_count(fields, int(value), words, source)
    if stated.thing == "driver" and not _machine_driver(fields):
        return [_set(fields, "driver", DriverInfo, {"version": value}, f"NVIDIA driver {value}", words, source)]
    cuda = fields.get("cuda")
    if stated.thing == "cuda" and not (cuda and (cuda.nvcc_release or cuda.toolkits or cuda.conda_cudatoolkit
                                                 or cuda.base_image_cuda or cuda.program_cuda)):
        release = ".".join(value.split(".")[:2])
        values = {"nvcc_release": release, **({"nvcc_version": value} if value.count(".") == 2 else {})}
        return [_set(fields, "cuda", CudaState, values, f"CUDA {value}", words, source)]
    smi = fields.get("smi")
    if stated.thing == "driver-cuda" and isinstance(smi, SmiReport) and not smi.cuda_version:
        return [_set(fields, "smi", SmiReport, {"cuda_version": value}, f"the driver's CUDA Version {value}", words,
                     source)]
    os_info = fields.get("os")
    if stated.thing == "distro" and stated.name and not (os_info and os_info.id):
        from gpuhealth.parsers.prose import distro_like

        values = {"id": stated.name, "id_like": distro_like(stated.name), "version_id": value}
        return [_set(fields, "os", OsInfo, values, f"{stated.name} {value}", words, source)]
    if stated.thing == "kernel" and not (os_info and os_info.kernel_release):
        facts = [_set(fields, "os", OsInfo, {"kernel_release": value}, f"kernel {value}", words, source)]
        install = fields.get("install")
        if not (install and install.kernel_release):
            facts.append(_set(fields, "install", InstallState, {"kernel_release": value}, f"kernel {value}", words,
                              source))
        return facts
    return []


def _library_path(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """A cuda-compat directory the words put on LD_LIBRARY_PATH, as an `echo $LD_LIBRARY_PATH` would show it (GH603
    judges it); none where a program's output gave LD_LIBRARY_PATH."""
    cuda = fields.get("cuda")
    if cuda is not None and cuda.ld_library_path:
        return []
    what = "LD_LIBRARY_PATH holds " + ":".join(stated.directories)
    return [_set(fields, "cuda", CudaState, {"ld_library_path": stated.directories}, what, stated.words, source)]


_UNIT_FIELDS = {"nvidia-fabricmanager": ("fabricmanager_active", "fabricmanager_enabled"),
                "nvidia-persistenced": ("persistenced_active", "persistenced_enabled")}


def _gpu_count(fields: dict[str, Any], count: int, words: str, source: str) -> list[ReportedFact]:
    """The GPU count the words state, where no program's output lists the GPUs (nvidia-smi, NVML, lspci)."""
    smi, nvml = fields.get("smi"), fields.get("nvml")
    listed = ((smi is not None and smi.gpus and not smi.partial) or (nvml is not None and getattr(nvml, "gpus", ()))
              or any(d.is_nvidia_gpu for d in fields.get("pci_devices") or ()))
    if listed:
        return []
    fields["gpus_stated"] = count
    return [ReportedFact("gpus_stated", (), f"{count} GPU(s) on this host", words, source)]


def _unit(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """A unit's state as ``systemctl status`` would give it (parsers/services.py): "could not be found" is
    inactive and not-found; none is set where a listing of that unit gave its state."""
    what = f"{stated.unit}: {' '.join(s for s in (stated.active, stated.enabled) if s)}"
    if stated.unit in _UNIT_FIELDS:
        active, enabled = _UNIT_FIELDS[stated.unit]
        cuda = fields.get("cuda")
        if cuda is not None and (getattr(cuda, active) or getattr(cuda, enabled)):
            return []
        values = {k: v for k, v in ((active, stated.active), (enabled, stated.enabled)) if v}
        return [_set(fields, "cuda", CudaState, values, what, stated.words, source)]
    env = fields.get("host_env")
    if stated.unit == "nvidia-container-toolkit":
        return _toolkit(fields, stated, source, what)
    if stated.unit != "docker" or stated.active is None or (env is not None and env.docker_active):
        return []
    values = {"docker_active": stated.active, **({"docker": False} if stated.enabled == "not-found" else {})}
    return [_set(fields, "host_env", HostEnvironment, values, what, stated.words, source)]


# what the words answer that pasted evidence otherwise leaves open (Snapshot.unavailable's key): the toolkit's
# absence, which live `check` reads from `nvidia-ctk --version` and the runtime's files
TOOLKIT_UNAVAILABLE = "env_nvidia_ctk"


def _toolkit(fields: dict[str, Any], stated: Any, source: str, what: str) -> list[ReportedFact]:
    """"The NVIDIA Container Toolkit is not installed": what live `check` concludes when `nvidia-ctk` and the
    runtime's files are absent (GH802), with the container engine the words use. Nothing where a program's output
    shows the toolkit, or where the words do not say it is missing."""
    env = fields.get("host_env")
    if stated.enabled != "not-found" or (env is not None and (env.nvidia_ctk_version or env.container_toolkit_files)):
        return []
    facts = [ReportedFact("unavailable", (TOOLKIT_UNAVAILABLE,), f"{stated.unit}: not installed", stated.words,
                          source)]
    engines = {e: True for e in stated.engines if env is None or getattr(env, e) is None}
    if engines:
        facts.append(_set(fields, "host_env", HostEnvironment, engines, f"{', '.join(engines)} in use", stated.words,
                          source))
    return facts


# --------------------------------------------------------------------------- install-time states


def told(source: str) -> str:
    """The source a check's evidence names for a state the words gave: the piece, marked as the reporter's words."""
    return f"{source} (the reporter's words)"


def fill_install(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """An install-time state the words give (``parsers.prose.InstallStatement``) into the field its program's output
    fills; nothing where that output is in the evidence."""
    filler = _INSTALL_FILLERS.get(stated.fact)
    return filler(fields, stated, source) if filler else []


def _install_values(fields: dict[str, Any], stated: Any, source: str, values: dict[str, Any],
                    what: str) -> list[ReportedFact]:
    return [_set(fields, "install", InstallState, values, what, stated.words, source)]


def _headers(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """"No kernel headers installed", "linux-headers-$(uname -r) is missing": /lib/modules/<release>/build missing
    (GH503). Not where a program's output looked at the headers or listed the headers packages, nor where the words
    name another release than the running kernel's."""
    install = fields.get("install")
    if install is not None and (install.headers_present is not None or install.kernel_packages_source):
        return []
    running = install.kernel_release if install is not None else None
    named = stated.subject
    if named and named[0].isdigit() and not (running and (running == named or running.startswith(named + "-")
                                                          or named.startswith(running))):
        return []  # the words name a release, and it is not known to be the running kernel's
    return _install_values(fields, stated, source, {"headers_present": False, "headers_path": told(source)},
                           "no kernel headers for the running kernel")


def _secure_boot(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """"Secure Boot is enabled": what ``mokutil --sb-state`` says (GH506)."""
    install = fields.get("install")
    if install is not None and install.secure_boot is not None:
        return []
    return _install_values(fields, stated, source, {"secure_boot": stated.value, "secure_boot_source": told(source)},
                           f"Secure Boot {stated.value}")


def _mok_key(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """"The MOK is not enrolled": what ``mokutil --test-key`` says of the signing key (GH506)."""
    install = fields.get("install")
    if install is not None and install.signing_key_state is not None:
        return []
    values = {"signing_key_state": "not-enrolled", "signing_key_line": stated.words[:200],
              "signing_key_source": told(source)}
    return _install_values(fields, stated, source, values, "the signing key is not enrolled")


def _unsigned(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """"The nvidia module is not signed": ``modinfo -F signer nvidia`` printing nothing (GH506)."""
    install = fields.get("install")
    if install is not None and install.module_signer is not None:
        return []
    return _install_values(fields, stated, source, {"module_signer": ""}, "the nvidia module is unsigned")


def _lockdown(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """"With kernel lockdown set to integrity", "the kernel is locked down": what /sys/kernel/security/lockdown says
    (GH506). Nothing where a program's output (the sysfs file, the boot line, a command line) gave the level."""
    install = fields.get("install")
    if install is not None and install.lockdown is not None:
        return []
    return _install_values(fields, stated, source, {"lockdown": stated.value, "lockdown_source": told(source)},
                           f"kernel lockdown {stated.value}")


def _modules(fields: dict[str, Any], given: list[Statement]) -> list[ReportedFact]:
    """"nvidia is not loaded", "lsmod shows no nvidia", "nouveau is loaded": a module list that speaks only for the
    names the words cover (``Snapshot.kernel_module_filters``, as for ``lsmod | grep``). Nothing where a program's
    output gave a module list."""
    if not given or fields.get("kernel_modules") is not None:
        return []
    loaded = tuple(s.stated.subject for s in given if s.stated.value == "loaded")
    covers = tuple(dict.fromkeys(s.stated.covers for s in given))
    fields.update(kernel_modules=loaded, kernel_module_filters=covers)
    what = ", ".join(f"{s.stated.subject}: {s.stated.value}" for s in given)
    words, source = given[-1].stated.words, given[-1].source
    return [ReportedFact("kernel_modules", (), what, words, source),
            ReportedFact("kernel_module_filters", (), f"the words speak for {', '.join(covers)}", words, source)]


def _docker_runtime(fields: dict[str, Any], stated: Any, source: str) -> list[ReportedFact]:
    """"docker info shows no nvidia runtime", "the runtime is in daemon.json but docker was not restarted": the running
    daemon's runtimes lack nvidia (GH802). Nothing where ``docker info`` or daemon.json is in the evidence."""
    env = fields.get("host_env")
    if env is not None and env.docker_runtimes_source is not None:
        return []
    values = {"docker_runtimes": (), "docker_runtimes_source": told(source),
              **({"docker": True} if env is None or env.docker is None else {})}
    return [_set(fields, "host_env", HostEnvironment, values, "Docker: no nvidia runtime", stated.words, source)]


def _same_kernel(one: str, other: str) -> bool:
    """"5.14" and "5.14.0-284.el9.x86_64" name one kernel as people write it."""
    from gpuhealth.parsers.prose import _same_version

    return _same_version(one, other) or _same_version(other, one)


def _kernel_modules(fields: dict[str, Any], given: list[Statement]) -> list[ReportedFact]:
    """"The module was built for 5.13 but I boot 5.14", "dkms did not build the module for 5.14" with a kernel the
    words say has it: the kernels' module files as ``find /lib/modules -name 'nvidia*'`` and ``uname -r`` would show
    them (GH507). Only where the words name both a kernel with the module and the running kernel without it (or the
    running kernel comes from a program's output); no version is made up. Nothing where a program's output lists
    the kernels' modules, DKMS's state or modinfo's answer, or names another running kernel."""
    install, os_info = fields.get("install"), fields.get("os")
    if not given or (install is not None and (install.kernels or install.dkms or install.module_found is not None)):
        return []
    stated = [s.stated for s in given]
    running = (install.kernel_release if install else None) or (os_info.kernel_release if os_info else None)
    told_running = {s.covers for s in stated if s.covers}
    if running is None and len(told_running) == 1:
        running = told_running.pop()
    elif running is None or not all(_same_kernel(r, running) for r in told_running):
        return []  # the running kernel unknown, or the words name another one than the machine's
    built = [s.subject for s in stated if s.value == "built" and not _same_kernel(s.subject, running)]
    lacks = any(_same_kernel(s.covers if s.value == "built" else s.subject, running) for s in stated
                if s.covers or s.value == "not-built")
    if not built or not lacks:
        return []
    source = given[-1].source
    kernels = (*(InstalledKernel(k, told(source)) for k in dict.fromkeys(built)), InstalledKernel(running, None))
    values = {"kernels": kernels, **({"kernel_release": running} if install is None or not install.kernel_release
                                     else {})}
    what = f"nvidia module for {', '.join(built)}, none for the running kernel {running}"
    words = " ".join(dict.fromkeys(s.words for s in stated))[:300]
    return [_set(fields, "install", InstallState, values, what, words, source)]


# --------------------------------------------------------------------------- packages


_TORCH_FIELDS = ("torch_version", "installed", "torch_cuda_version", "cuda_available")


def fill_packages(fields: dict[str, Any], given: list[Statement]) -> list[ReportedFact]:
    """The packages the words say are installed (``parsers.prose.PackageStatement``) into the fields a pasted package
    listing fills (evidence/listings.py): the system packages into ``host_env.packages`` (GH509, GH603, GH209), pip's
    torch wheel into ``torch`` (GH605, GH601), the run-file installer into ``host_env.runfile_*`` (GH509). Each only
    where no program's output gave that field. A package the words say was removed later ("I removed cuda-compat",
    which names every cuda-compat-X-Y) is not there."""
    removed = [s.stated.name for s in given if not s.stated.present]
    present = [s for s in given if s.stated.present and not any(
        s.stated.name == gone or s.stated.name.startswith(gone + "-") for gone in removed)]
    facts: list[ReportedFact] = []
    system = [s for s in present if not s.stated.manager]
    env = fields.get("host_env")
    if system and not (env is not None and (env.packages or env.package_source)):
        source = system[-1].source
        packages = tuple(NvidiaPackage(s.stated.name, s.stated.version, "reported") for s in system)
        sentences = list(dict.fromkeys(s.stated.words for s in system))
        what = f"installed: {', '.join(p.name for p in packages)}"
        facts.append(_set(fields, "host_env", HostEnvironment, {"packages": packages, "package_source": told(source)},
                          what, sentences[0], source))
        facts += [ReportedFact("host_env", ("packages",), what, words, source) for words in sentences[1:4]]
    for statement in present:
        stated, env = statement.stated, fields.get("host_env")
        if stated.manager == "runfile" and not (env is not None and (env.runfile_result or env.runfile_uninstaller)):
            facts.append(_set(fields, "host_env", HostEnvironment, {"runfile_result": "installed",
                                                                   "runfile_version": stated.version},
                              f"the run-file installer {stated.version}", stated.words, statement.source))
        elif stated.manager == "pip" and stated.version and fields.get("torch") is None:
            from gpuhealth.evidence.listings import torch_from_version

            torch = torch_from_version(stated.version)
            values = {k: getattr(torch, k) for k in _TORCH_FIELDS if getattr(torch, k) is not None}
            facts.append(_set(fields, "torch", TorchEnv, values, f"torch {stated.version}", stated.words,
                              statement.source))
    return facts


_INSTALL_FILLERS = {"headers": _headers, "secure-boot": _secure_boot, "mok-key": _mok_key,
                    "module-signed": _unsigned, "docker-runtime": _docker_runtime, "lockdown": _lockdown}


# --------------------------------------------------------------------------- PCIe links


@record
class BoardPcie:
    """A stated link and the one GPU model the words name."""

    pcie: Any  # parsers.prose.PcieStatement
    board: Any  # knowledge.gpu_pcie.BoardLink


def with_model(text: str, found: tuple[Any, ...]) -> list[BoardPcie]:
    """The link the words state (``PcieStatement``), with the model they name: nothing when they name no model of
    the table or several, or state different links."""
    from gpuhealth.knowledge.gpu_pcie import boards_named

    boards = boards_named(text)
    links = {(s.gen, s.width, s.expected_width) for s in found}
    if len(boards) != 1 or len(links) != 1:
        return []
    return [BoardPcie(found[-1], boards[0])]


def _machine_link(fields: dict[str, Any]) -> bool:
    """Whether a program's output in the evidence gives a GPU's link (nvidia-smi -q, NVML, lspci -vv, sysfs)."""
    smi, nvml = fields.get("smi"), fields.get("nvml")
    gpus = (*(smi.gpus if smi else ()), *(getattr(nvml, "gpus", ()) or ()))
    return (any(g.pcie_width_current or g.pcie_gen_current for g in gpus)
            or any(d.is_nvidia_gpu and d.link_width_current for d in fields.get("pci_devices") or ()))


def fill_pcie(fields: dict[str, Any], stated: BoardPcie, source: str) -> list[ReportedFact]:
    """The GPU's link as the words state it: into the one GPU of that model nvidia-smi lists, else a GPU of its own
    in an excerpt of the driver's list (``partial``: it counts no GPUs). Nothing where a program's output gives a
    link, or where nvidia-smi lists several GPUs of the model (which one is meant is unknown)."""
    if _machine_link(fields):
        return []
    link, board = stated.pcie, stated.board
    width_max = max(board.pcie_width, link.expected_width or 0)
    values = {"pcie_gen_current": link.gen, "pcie_gen_max": board.pcie_gen if link.gen else None,
              "pcie_width_current": link.width, "pcie_width_max": width_max if link.width else None,
              "utilization_gpu_pct": link.busy_pct}
    values = {k: v for k, v in values.items() if v is not None}
    what = (f"{board.name}: PCIe" + (f" Gen{link.gen}" if link.gen else "") + (f" x{link.width}" if link.width else "")
            + f" (the board: Gen{board.pcie_gen} x{board.pcie_width}, {board.source})")
    smi = fields.get("smi")
    if smi is None:
        gpu = Gpu(name=board.name, source=source, **values)
        fields["smi"] = SmiReport(gpus=(gpu,), format="reported", partial=True)
        return [ReportedFact("smi", (), what, link.words, source)]
    named = [i for i, g in enumerate(smi.gpus) if _named(board.pattern, g.name or "")]
    if len(named) != 1:
        return []
    at = named[0]
    gpu = smi.gpus[at]
    values = {k: v for k, v in values.items() if getattr(gpu, k) is None}
    if not values:
        return []
    gpus = list(smi.gpus)
    gpus[at] = replace(gpu, **values)
    fields["smi"] = replace(smi, gpus=tuple(gpus))
    return [ReportedFact("smi", tuple(f"gpu:{at}:{k}" for k in values), what, link.words, source)]


def _named(pattern: str, name: str) -> bool:
    """Whether nvidia-smi's name of a GPU is the board a gpu_pcie.csv row names."""
    import re

    return re.search(pattern, name, re.IGNORECASE) is not None


def fill_named_gpus(fields: dict[str, Any], texts: list[tuple[str, str]]) -> tuple[ReportedFact, ...]:
    """The GPU models (and counts) the texts name outside nvidia-smi's GPU list (parsers/gpu_mentions.named_gpus), in
    ``fields["gpus_named"]``: reported facts, so that what rests on them stays below critical and their words are
    quoted. The checks prefer a program's list of the GPUs wherever there is one."""
    smi, nvml = fields.get("smi"), fields.get("nvml")
    if ((smi is not None and smi.gpus and not smi.partial) or (nvml is not None and getattr(nvml, "gpus", ()))
            or any(d.is_nvidia_gpu for d in fields.get("pci_devices") or ())):
        return ()  # a program lists the GPUs: its names decide, and its lines are no one's words
    from gpuhealth.parsers.gpu_mentions import MAX_NAMED, named_gpus  # (imported only when words may name them)
    found = []
    for source, text in texts:
        found += [g for g in named_gpus(text[:2_000_000], source)
                  if all(g.named.lower() != seen.named.lower() for seen in found)]
    if not found:
        return ()
    fields["gpus_named"] = tuple(found[:MAX_NAMED])
    return tuple(ReportedFact("gpus_named", (), f"{g.count or 'a'} x {g.named} ({g.line})", g.words, g.source)
                 for g in found[:MAX_NAMED])
