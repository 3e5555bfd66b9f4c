"""Checks added with the diagnosis of pasted evidence: a driver branch that does not support the GPU
(GH209), Fabric Manager down on an NVSwitch system (GH210), GPU memory held at 0 % utilisation (GH414),
a CUDA library the loader cannot find (GH612), and NCCL/P2P failures with the IOMMU or PCIe ACS in the way
(GH706). Each reads snapshot fields like every other check; the catalogue's matched lines
(``snapshot.messages``) are one of those fields."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.kernel_log import refusals_read_as_faulty_gpus
from gpuhealth.checks.registry import (
    MAX_LINE_EVIDENCE,
    Draft,
    Expectations,
    Skip,
    check,
    line_evidence,
    table_fixes,
)
from gpuhealth.commands import fix as slotted
from gpuhealth.inert import one_line
from gpuhealth.knowledge.drivers import architecture, branch_of, branches
from gpuhealth.knowledge.gpus import lookup
from gpuhealth.knowledge.legacy import last_branch
from gpuhealth.knowledge.signatures import signature
from gpuhealth.knowledge.symptom_phrases import TOLD_PREFIX
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import REPORTED_WORDS, Evidence, Fix, Gpu, MessageLine, PciDevice, Severity, Snapshot
from gpuhealth.model import Mention as MentionT

MAX_LINES = MAX_LINE_EVIDENCE


def lines_for(snapshot: Snapshot, code: str) -> list[MessageLine]:
    """The lines of the evidence that the signature catalogue files under ``code``."""
    return [m for m in snapshot.messages or () if m.signature and signature(m.signature).code == code]


def _severity(messages: list[MessageLine]) -> Severity:
    ranks = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}
    return max((ranks[signature(m.signature).severity] for m in messages if m.signature), key=lambda s: s.rank,
               default=Severity.WARNING)


# --------------------------------------------------------------------------- GH209

_BANNER_VERSION = lazy_re(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d{3}\.\d+(?:\.\d+)?)")


def driver_versions(snapshot: Snapshot) -> list[tuple[str, str]]:
    """(version, where it was seen): the loaded module, nvidia-smi, the installer, DKMS, the load banner."""
    found: list[tuple[str, str]] = []
    if snapshot.driver and snapshot.driver.version:
        found.append((snapshot.driver.version, "/proc/driver/nvidia/version"))
    if snapshot.smi and snapshot.smi.driver_version:
        found.append((snapshot.smi.driver_version, snapshot.sources.get("smi", "nvidia-smi")))
    if snapshot.host_env and snapshot.host_env.runfile_version:
        found.append((snapshot.host_env.runfile_version, "/var/log/nvidia-installer.log"))
    for entry in snapshot.install.dkms if snapshot.install else ():
        if entry.module == "nvidia":
            found.append((entry.version, "dkms status"))
    for banner in snapshot.kernel_log.module_banners if snapshot.kernel_log else ():
        m = _BANNER_VERSION.search(banner)
        if m:
            found.append((m[1], "kernel log"))
    return found


@check("GH209", "driver-gpu-unsupported", "The driver branch does not support this GPU",
       reads=("kernel_log", "messages"))
def driver_gpu_unsupported(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The installed or loaded driver branch cannot drive a GPU on the PCI bus: the branch is older than
    the GPU's architecture (a Blackwell GPU needs 570 or newer, Hopper and Ada 520, Ampere 455), or newer
    than the architecture's last legacy branch (Kepler ends with 470, Maxwell, Pascal and Volta with
    580), or a Blackwell GPU runs the proprietary kernel module, which does not support it. The PCI
    device ID gives the GPU's last branch: NVIDIA's own list per device ID (`knowledge/legacy_gpus.csv`, from
    the driver package's supported-gpus.json: the 71.86.xx, 96.43.xx, 173.14.xx, 304.xx, 340.xx, 367.xx,
    390.xx and 470.xx legacy branches), else its architecture's (`knowledge/gpus.csv`, `knowledge/drivers.csv`).
    The driver's own message ("NVRM: The NVIDIA GPU ... installed in this system is not supported by the ...
    NVIDIA driver release", "... supported through the NVIDIA 340.xx Legacy drivers") also raises it, and leads.

    An lspci list without device IDs (no -nn) names the GPU by its pci.ids model ("GK210GL [Tesla K80]"). Where no
    lspci list was given, the GPUs named elsewhere count: a PCI ID in a log line (10de:0612), a cloud's accelerator
    type (nvidia-tesla-k80), or a model a person names ("NVIDIA 9800GTX+", "Tesla K80"). The driver may come from
    package names (nvidia-driver-470, nvidia-driver-535-server, libnvidia-gl-535, libgl1-nvidia-glx_343.22 in dpkg
    or apt output; cuda-drivers-510; an RPM such as kmod-nvidia-latest-dkms-550.54.15-1.el8), NVIDIA's installer
    file (NVIDIA-Linux-x86_64-510.47.03.run), the driver container's image (nvidia/driver:535.104.05-ubuntu22.04) or
    the GPU Operator's driver.version, a machine image named after it (ubuntu-2004-nvidia-510), also in the commands
    of a pasted session, or words ("driver 510", "the R470 branch", "the 470.xx legacy driver"). A GPU and a driver
    named only in a person's sentences are the reporter's words: the finding stays a warning unless a program's
    output shows the driver failing (nvidia-smi, the kernel log), which it then explains. A model named in words
    beside another model the branch supports ("RTX 3090, GTX 770") is not held against the driver. A current model
    named in words ("an RTX 4090") on a branch older than its architecture's first is the too-old half, from words.

    Why it matters:
    The module loads but probes no GPU, or refuses to load; nvidia-smi says "No devices were found" or
    cannot talk to the driver. Reinstalling the same branch changes nothing.

    How to fix:
    Install a branch that supports the GPU: for a new GPU the current production branch (for
    Blackwell with the open kernel modules, `nvidia-driver-570-open` or newer); for a legacy GPU its
    last legacy branch (`nvidia-driver-470` for Kepler), from the distribution's package where one exists
    (Debian keeps `nvidia-legacy-340xx-driver` and `nvidia-legacy-390xx-driver` patched for newer kernels); where
    the evidence names Ubuntu or Debian, only that distribution's package is offered.
    The 304.xx and older branches have no package in any current distribution and do not build on current
    kernels: such a GPU runs with nouveau or is replaced. Then reboot and check that nvidia-smi lists it. When the
    open module itself refuses the GPU ("is not supported by open nvidia.ko", a GPU without GSP:
    Maxwell, Pascal, Volta; or R515-R525's "Open nvidia.ko is only ready for use on Data Center GPUs"),
    install the proprietary flavour of the branch (`nvidia-driver-<branch>`, no `-open`); on those
    early releases `options nvidia NVreg_OpenRmEnableUnsupportedGpus=1` also lets the open module run.

    Exceptions:
    A GPU passed through to a virtual machine (bound to vfio-pci) is not driven on the host. A GPU the release
    refuses while the driver took its siblings, when the support table says the release's branch drives that GPU's
    architecture, is a faulty GPU (GH102, NVIDIA/aicr#1858), not an unsupported one.
    """
    lines = lines_for(snapshot, "GH209")
    faulty = refusals_read_as_faulty_gpus(snapshot)
    if faulty:
        # the driver took the refused GPU's siblings and its own table supports the model: the refusal is the faulty
        # GPU's (GH102), whether the log tags the message's continuation lines with NVRM or not (NVIDIA/aicr#1858)
        lines = [m for m in lines if m.signature != "nvrm-gpu-not-supported"]
    drivers = _driver_claims(snapshot)
    gpus = [d for d in snapshot.nvidia_pci_gpus if d.kernel_driver not in ("vfio-pci", "pci-stub")]
    problems: list[str] = []
    evidence: list[Evidence] = []
    legacy = _legacy_branch(lines)  # "supported through the NVIDIA 580.xx Legacy drivers": that branch
    if lines and not legacy:  # "... (PCI ID: 10de:1004) ... is not supported by the ...": the ID's last branch
        legacy = _refused_legacy(snapshot, lines, drivers)
    words = False  # a problem rests on a person's words (a GPU named in a sentence): at most a warning
    if drivers and gpus:
        version, where, told, said = drivers[0]
        number = branch_of(version)
        for device in gpus:
            device_id = device.device_id or _named_device_id(device.name)
            if device_id is None:
                continue
            name = device.name or f"[10de:{device_id}]"
            last = last_branch(device_id)
            if number is not None and last is not None and number > last.number:
                problems.append(f"{name} is supported only up to the {last.label} legacy driver branch; "
                                f"driver {version} is branch {number}{_architecture(device_id)}")
                legacy = legacy or last.label
                words = words or told
                evidence.append(Evidence(REPORTED_WORDS if told else where, (said,)))
                evidence.append(Evidence(snapshot.sources.get("pci_devices", "lspci"), (_pci_line(device),)))
                continue
            model = lookup(device_id)
            if number is None or model is None:
                continue
            arch = architecture(model.architecture)
            if arch is None:
                continue
            if arch.first_branch is not None and number < arch.first_branch:
                problems.append(f"{name} ({model.architecture}) is not supported by driver {version}: "
                                f"{model.architecture} needs branch {arch.first_branch} or newer")
                words = words or told
                evidence.append(Evidence(REPORTED_WORDS if told else where, (said,)))
                evidence.append(Evidence(snapshot.sources.get("pci_devices", "lspci"), (_pci_line(device),)))
            elif (arch.open_modules == "required" and snapshot.driver is not None
                  and snapshot.driver.flavour == "proprietary"):
                problems.append(f"{name} ({model.architecture}) needs the open kernel modules; the proprietary "
                                f"module {version} is loaded")
                evidence.append(Evidence("/proc/driver/nvidia/version", (snapshot.driver.banner or version,)))
    elif drivers and not snapshot.nvidia_pci_gpus:
        found = _named_gpus_too_new_a_driver(snapshot, drivers[0])  # no PCI list: the GPUs the text names
        found = found or _named_gpu_too_old_a_driver(snapshot, drivers[0])
        if found is not None:
            problem, last, told, shown = found
            problems.append(problem)
            legacy = legacy or last
            words = words or told
            evidence += shown
    if not problems and not lines:
        if (not drivers or not (gpus or _gpu_mentions(snapshot))) and not faulty:  # a refusal read as faulty: judged
            yield Skip("needs the driver version and the GPUs' PCI IDs (lspci -nn), or the driver's message")
        return
    open_refused = not problems and bool(lines) and all(m.signature in _OPEN_FLAVOUR_REFUSED for m in lines)
    with_gsp = _refused_with_gsp(snapshot) if open_refused else None
    if with_gsp:
        # the row says "no GSP: Maxwell, Pascal, Volta"; the PCI ID names an architecture that has one
        message = (f"The open kernel module refused {with_gsp}, saying it has no usable GSP, yet that architecture "
                   "has one (not the pre-Turing case); the proprietary flavour runs it without the GSP")
    elif open_refused:
        message = signature(lines[0].signature).summary
    elif problems:
        message = problems[0]
    elif legacy:
        message = f"The GPU is supported only by the {legacy} legacy driver branch; this driver ignores it"
    else:
        message = "The driver says it does not support a GPU in this system"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more)"
    if open_refused:
        fixes = _proprietary_fixes(lines)
    elif legacy:
        fixes = _legacy_fixes(legacy, snapshot.os.id if snapshot.os else None)
    else:
        fixes = table_fixes("GH209")
    # the driver's own refusal is the machine saying it; a GPU or a driver named only in words is the reporter's
    severity = Severity.WARNING if words and not lines else Severity.CRITICAL
    yield Draft(severity, message, evidence=tuple(dict.fromkeys(evidence)) + line_evidence(lines),
                fixes=fixes,
                explains=("GH201", "GH203", "GH102", "GH305", "GH303"))


_BRACKETED = lazy_re(r"\[([^\[\]]{2,60})\]")


def _named_device_id(name: str | None) -> str | None:
    """The device ID of a GPU lspci listed without one (no -nn: "NVIDIA Corporation GK210GL [Tesla K80]"), from the
    model pci.ids puts in brackets ("[GeForce 9800 GTX / 9800 GTX+]": its first board). Boards sharing a name whose
    last branches differ name the most recent (it holds for all of them); None when no table knows the name."""
    from gpuhealth.knowledge.gpus import device_id_for
    from gpuhealth.knowledge.legacy import devices_named

    for model in _BRACKETED.findall(name or "")[:2]:
        first = model.split("/")[0].strip()
        devices = devices_named(first)
        if devices:
            return max(devices, key=lambda d: last_branch(d).number if last_branch(d) else 0)
        device, _ = device_id_for(first)
        if device is not None:
            return device
    return None


def _pci_line(device: PciDevice) -> str:
    shown = f" [10de:{device.device_id}]" if device.device_id else ""
    return f"{device.address} {device.name or ''}{shown}".strip()


def _architecture(device_id: str) -> str:
    model = lookup(device_id)
    return f" ({model.architecture})" if model is not None else ""


def _driver_claims(snapshot: Snapshot) -> list[tuple[str, str, bool, str]]:
    """(version or branch, where it was seen, whether only a person's words say it, the line that says it), the
    programs' first: the loaded module, nvidia-smi, the installer, DKMS, the load banner, the installed packages,
    package names in logs."""
    told = snapshot.reported_fact("driver", "version") is not None
    found = [(version, where, told and where == "/proc/driver/nvidia/version", f"driver {version}")
             for version, where in driver_versions(snapshot)]
    told_packages = snapshot.reported_fact("host_env", "packages") is not None  # "I have nvidia-driver-535 installed"
    for package in snapshot.host_env.packages if snapshot.host_env else ():
        if package.name.startswith("cuda-compat"):
            continue  # its version is the forward-compatibility libcuda's, not the installed driver's (GH603)
        version = _package_driver(package.name, package.version)
        if version:
            found.append((version, snapshot.host_env.package_source or package.manager or "packages", told_packages,
                          f"{package.name} {package.version or ''}".strip()))
    for mention in snapshot.mentioned:
        if mention.what == "driver":
            found.append((mention.value, mention.source, mention.reported, mention.line))
    # a branch past every branch NVIDIA has announced is no driver ("a GeForce 840M driver": a model number)
    newest = max((b.number for b in branches()), default=0) + _BRANCH_SLACK
    found = [claim for claim in found if (branch_of(claim[0]) or 0) <= newest]
    return sorted(found, key=lambda claim: claim[2])  # a program's output before a person's words


_BRANCH_SLACK = 30  # branches come about 5 to 10 apart: a few newer than the table are still drivers


def _package_driver(name: str, version: str | None) -> str | None:
    """The driver version or branch an installed package stands for (``nvidia-driver-470`` 470.256.02 -> 470.256.02,
    ``libgl1-nvidia-glx`` 343.22-2 -> 343.22); None for a package that is not the driver (the container toolkit)."""
    from gpuhealth.parsers.gpu_mentions import mentions

    named = mentions(f"{name} {version or ''}".strip(), "packages")
    return next((m.value for m in named if m.what == "driver"), None)


def _gpu_mentions(snapshot: Snapshot) -> list[MentionT]:
    return [m for m in snapshot.mentioned if m.what == "gpu"]


def _named_gpus_too_new_a_driver(snapshot: Snapshot, driver: tuple[str, str, bool, str]
                                 ) -> tuple[str, str, bool, list[Evidence]] | None:
    """The first GPU the text names (a PCI ID in a log line, a model in words) that the driver's branch no longer
    supports: (problem, its last branch, whether it rests on words, evidence); None when none is."""
    version, where, told, said = driver
    number = branch_of(version)
    if number is None:
        return None
    listed = bool(snapshot.gpus)  # the driver lists GPUs: a model named only in words is not shown to be here
    # a hardware list in words naming another GPU this branch drives ("RTX 3090, and a GTX 770 in the closet"): the
    # driver is that GPU's, and an old model beside it is no evidence that this driver meets a GPU it cannot drive
    other = _named_gpu_it_drives(snapshot, number)
    for mention in _gpu_mentions(snapshot):
        if (listed or other) and mention.reported:
            continue
        lasts = [b for b in (last_branch(d) for d in mention.value.split()) if b is not None]
        if not lasts or len(lasts) < len(mention.value.split()):
            continue  # a name some of whose boards a current branch supports: nothing to say
        last = max(lasts, key=lambda b: b.number)  # boards sharing a name: the most recent branch any of them has
        if number <= last.number:
            continue
        name = f" ({last.name})" if last.name and last.name != mention.named else ""
        problem = (f"{mention.named}{name} is supported only up to the {last.label} legacy driver branch; "
                   f"the driver here is {version} (branch {number})")
        shown = [Evidence(REPORTED_WORDS if told else where, (said,)),
                 Evidence(REPORTED_WORDS if mention.reported else mention.source, (mention.line,))]
        return problem, last.label, told or mention.reported, shown
    return None


def _named_gpu_too_old_a_driver(snapshot: Snapshot, driver: tuple[str, str, bool, str]
                                ) -> tuple[str, str, bool, list[Evidence]] | None:
    """The first GPU model the words name ("an RTX 4090") whose architecture needs a newer branch than the driver's
    (the other half of GH209: a new GPU on an old driver): (problem, "" (no legacy branch), True, evidence). None
    where the driver lists GPUs (it drives them) or no named model is newer than the branch."""
    from gpuhealth.knowledge.gpus import device_id_for

    version, where, told, said = driver
    number = branch_of(version)
    if number is None or snapshot.gpus:
        return None
    for gpu in snapshot.gpus_named:
        device, _ = device_id_for(gpu.named)
        model = lookup(device) if device else None
        arch = architecture(model.architecture) if model else None
        if arch is None or arch.first_branch is None or number >= arch.first_branch:
            continue
        problem = (f"{gpu.named} ({model.architecture}) is not supported by driver {version}: "
                   f"{model.architecture} needs branch {arch.first_branch} or newer")
        shown = [Evidence(REPORTED_WORDS if told else where, (said,)), Evidence(REPORTED_WORDS, (gpu.words,))]
        return problem, "", True, shown
    return None


def _named_gpu_it_drives(snapshot: Snapshot, number: int) -> bool:
    """Whether the words name a GPU that driver branch ``number`` supports (a current model, or a legacy one whose
    last branch is this one or later)."""
    from gpuhealth.knowledge.legacy import devices_named

    legacy = [m.named.lower() for m in _gpu_mentions(snapshot)]
    for gpu in snapshot.gpus_named:
        if any(gpu.named.lower() in named or named in gpu.named.lower() for named in legacy):
            continue  # the legacy model itself, as the product-line reader names it ("GeForce 9800" of "9800 GT")
        lasts = [last_branch(d) for d in devices_named(gpu.named)]
        if not lasts or any(b is None or b.number >= number for b in lasts):
            return True
    return False


# The open kernel module's own refusals: the GPU is supported by the driver, not by this flavour of it.
_OPEN_FLAVOUR_REFUSED = frozenset({"nvrm-gpu-not-supported-by-open", "nvrm-open-datacenter-only"})


_PCI_ID = lazy_re(r"\(PCI ID: 10de:([0-9a-fA-F]{4})\)")


def _refused_with_gsp(snapshot: Snapshot) -> str | None:
    """'GPU at ADDR (ARCH)' for the first GPU the open module refused whose architecture has a GSP (Turing on)."""
    for event in snapshot.kernel_log.events if snapshot.kernel_log else ():
        m = _PCI_ID.search(event.line)
        model = lookup(m[1]) if m else None
        arch = architecture(model.architecture) if model else None
        if arch is not None and arch.open_modules != "unsupported":
            return f"the GPU at {event.pci_address or 'an unnamed address'} [10de:{m[1].lower()}, {model.architecture}]"
    return None


_RELEASE = lazy_re(r"NVIDIA (\d{2,3}(?:\.\d+){0,2})(?:\.xx)? (?:NVIDIA )?driver release")


def _refused_legacy(snapshot: Snapshot, lines: list[MessageLine], drivers: list[tuple[str, str, bool, str]]
                    ) -> str | None:
    """The legacy branch of a GPU the driver refused without naming one ("is not supported by the NVIDIA 535.183.01
    driver release"), from the PCI ID its message gives, when the refusing release is past that branch."""
    texts = [m.line for m in lines if m.signature == "nvrm-gpu-not-supported"]
    if not texts:
        return None
    events = snapshot.kernel_log.events if snapshot.kernel_log else ()
    texts += [e.message for e in events if "PCI ID" in e.message and "not supported" in e.message][:MAX_LINES]
    release = next((m[1] for m in map(_RELEASE.search, texts) if m), None) or (drivers[0][0] if drivers else None)
    number = branch_of(release)
    for text in texts:
        found = _PCI_ID.search(text)
        last = last_branch(found[1]) if found else None
        if last is not None and number is not None and number > last.number:
            return last.label
    return None


_LEGACY_BRANCH = lazy_re(r"NVIDIA (\d{2,3}(?:\.\d{2})?)\.xx Legacy")


def _legacy_branch(lines: list[MessageLine]) -> str | None:
    """The legacy branch the driver's refusal names ("340.xx"), as NVIDIA writes it."""
    for message in lines:
        m = _LEGACY_BRANCH.search(message.line)
        if m:
            return f"{m[1]}.xx"
    return None


# The distributions' packages of each legacy branch, as their package archives list them (packages.ubuntu.com,
# packages.debian.org; RPM Fusion's howto/NVIDIA page): (package, where). A branch without a row has no package in
# a supported distribution release.
# The first field is the distribution that has the package (os-release ID): where the evidence names the distribution,
# only its own packages are offered (Debian's nvidia-tesla-470-driver is no Ubuntu package).
_LEGACY_PACKAGES: dict[int, tuple[tuple[str, str, str], ...]] = {
    580: (("ubuntu", "nvidia-driver-580", "Ubuntu"),),
    470: (("ubuntu", "nvidia-driver-470", "Ubuntu 20.04 and 22.04"),
          ("debian", "nvidia-tesla-470-driver", "Debian 12")),
    390: (("ubuntu", "nvidia-driver-390", "Ubuntu 22.04 and older <https://packages.ubuntu.com/jammy/nvidia-driver-390>"),
          ("debian", "nvidia-legacy-390xx-driver",
           "Debian <https://packages.debian.org/sid/nvidia-legacy-390xx-driver>")),
    340: (("debian", "nvidia-legacy-340xx-driver",
           "Debian, patched to build on newer kernels <https://packages.debian.org/sid/nvidia-legacy-340xx-driver>"),),
}
# When NVIDIA's support of a legacy branch ended (its Unix legacy GPU page, "support timeframes"): after it, no
# release follows for newer kernels and X servers.
_LEGACY_ENDED = {71: "2011", 96: "2012", 173: "2013", 304: "2017", 340: "2019", 390: "2022", 470: "2024"}


def _legacy_fixes(label: str, distro: str | None = None) -> tuple[Fix, ...]:
    """A GPU past its last branch: that legacy branch, proprietary (the open modules never ran pre-Turing GPUs), from a
    distribution package where one exists; said plainly where none does. ``distro``: the os-release ID the evidence
    names (Ubuntu or Debian: that distribution's packages only)."""
    number = int(label.split(".")[0])
    packages = _LEGACY_PACKAGES.get(number, ())
    if distro in ("ubuntu", "debian"):
        packages = tuple(p for p in packages if p[0] == distro)
    fixes = list(_gh209_looks())
    if packages:
        for _, name, _ in packages:
            fixes.append(slotted("apt list {package}", "debian", package=name,
                                 note="whether this release has the package (nvidia-detect on Debian names the one "
                                      "the GPU needs)"))
        for _, name, where in packages:
            fixes.append(slotted("sudo apt-get install {package}", "debian", disruptive=True,
                                 note=f"the {label} legacy branch, proprietary (no -open): {where}; then reboot",
                                 package=name))
        if number in (470, 580):
            fixes += _rhel_stream(number)
        if number <= 390:
            step = (f"NVIDIA no longer updates the {label} branch (support ended {_LEGACY_ENDED[number]}): "
                    "it builds only on the kernels its packages were patched for; with a newer kernel, "
                    "stay on the distribution release that packages it")
            fixes.append(Fix(step, "any", kind="step"))
    elif _LEGACY_PACKAGES.get(number):  # another distribution packages it, this one does not
        step = (f"{distro.capitalize() if distro else 'This distribution'} has no package of the {label} legacy driver "
                f"({' and '.join(p[2].split(' <')[0].split(',')[0] for p in _LEGACY_PACKAGES[number])} has one): "
                "run the GPU on that, or with nouveau, or replace it")
        fixes.append(Fix(step, "any", kind="step"))
        if number in (470, 580):
            fixes += _rhel_stream(number)
    else:
        ended = f" (support ended {_LEGACY_ENDED[number]})" if number in _LEGACY_ENDED else ""
        step = (f"No current distribution packages the {label} legacy driver{ended} and it does not build on "
                "current kernels: run the GPU with nouveau, or an OS release of its time, or replace it "
                "(no CUDA release that deep learning frameworks use supports it)")
        fixes.append(Fix(step, "any", kind="step"))
    return tuple(fixes)


def _rhel_stream(number: int) -> list[Fix]:
    """The branch's module stream in NVIDIA's CUDA repository for RHEL, after the look that says whether this release's
    repository has it (a stream exists only for the branches built for that release)."""
    return [Fix("dnf module list nvidia-driver", "rhel",
                note=f"whether this release's NVIDIA repository has the {number}-dkms stream"),
            slotted("sudo dnf module install nvidia-driver:{branch}-dkms", "rhel", disruptive=True,
                    note=f"NVIDIA's repository; RPM Fusion names it akmod-nvidia-{number}xx", branch=number)]


def _gh209_looks() -> tuple[Fix, ...]:
    """The table's read-only GH209 commands (the device ID, the branches on offer); its installs name -open."""
    return tuple(f for f in table_fixes("GH209") if not f.disruptive)


def _proprietary_fixes(lines: list[MessageLine]) -> tuple[Fix, ...]:
    """The open module refused the GPU: installing an -open package again changes nothing."""
    fixes = [*_gh209_looks(),
             Fix("sudo apt-get install nvidia-driver-<branch>", "debian", disruptive=True,
                 note="the proprietary flavour (no -open), then reboot"),
             Fix("sudo dnf module install nvidia-driver:<branch>-dkms", "rhel", disruptive=True,
                 note="the proprietary flavour, then reboot")]
    if any(m.signature == "nvrm-open-datacenter-only" for m in lines):
        # R515-R525 open modules ran GeForce/workstation GPUs only when asked (NVIDIA README, kernel_open).
        fixes.append(Fix("echo 'options nvidia NVreg_OpenRmEnableUnsupportedGpus=1' | sudo tee "
                         "/etc/modprobe.d/nvidia-open.conf", "any",
                         note="or keep the open module (alpha on this GPU in that release), then reload it"))
    return tuple(fixes)


# --------------------------------------------------------------------------- GH210

_NOT_RUNNING = ("failed", "inactive", "dead", "not-found", "activating")
_SXM = lazy_re(r"SXM|HGX|HBM3|\b[BH]200\b|\bGB200\b")


def nvswitch_present(snapshot: Snapshot) -> bool | None:
    if snapshot.pci_devices is None:
        return None
    return any(d.vendor_id == "10de" and ("NVSwitch" in (d.name or "") or (d.class_code or "").startswith("0680"))
               for d in snapshot.pci_devices)


@check("GH210", "fabric-manager-failed", "Fabric Manager is not running on an NVSwitch system", reads=("messages",))
def fabric_manager_failed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    On a system whose GPUs talk through NVSwitch (HGX/DGX A100, H100, H200, B200), the
    `nvidia-fabricmanager` service is failed or inactive, logged errors, or a program reports CUDA
    error 802 "system not yet initialized" (`cudaErrorSystemNotReady`), which is what CUDA says until
    Fabric Manager has set the fabric up.

    Where Fabric Manager's own lines (its log, /var/log/fabricmanager.log, or the unit's journal, with its
    start script nvidia-fabricmanager-start.sh) say why it did not start, that reason leads, with its own fix
    (knowledge/signatures.csv rows `fm-*` and their `GH210:<row>` fixes): on NVLink 5 systems (HGX/DGX B200,
    GB200) the ib_umad kernel module not loaded, or the NVLink Subnet Manager (the nvlsm package) not
    installed, which the Fabric Manager User Guide makes a prerequisite there; a Fabric Manager of another
    version than the driver's; fewer NVSwitches than the baseboard has ("detected number of NVSwitches don't
    match with any supported system topology"). Any other [ERROR] line of its log is Fabric Manager's word
    too: with nothing saying it is down, a warning that quotes it (is it still running, did the GPUs join the
    fabric?), never an unknown line. GPUs that nvidia-smi -q shows outside the fabric (Fabric State "In
    Progress" or "Not Started") are the same condition seen from the GPU: alone a warning (Fabric Manager may
    still be starting), beside a failure its evidence; a registration that completed with an error (State
    "Completed", Status other than "Success": NVML's nvmlGpuFabricInfo_t, whose status counts once the state is
    complete) is over, and the GPU stays out: critical, with Fabric Manager's log and a GPU reset. "N/A" and "Not
    Supported" are GPUs of no fabric. NV_WARN_NOTHING_TO_DO (Fabric Manager found no
    NVSwitch) is harmless on PCIe GPUs, but on NVLink 5 GPUs (B200, B300, GB200) it means the NVLink Subnet
    Manager did not run, and beside GPUs waiting to join the fabric, or on a system shown to be an NVSwitch board
    (eight SXM GPUs of one HGX board, H20 and H800 boards included), NVSwitches Fabric Manager cannot see.

    Fabric Manager's log is read as its own (the `[date] [LEVEL] [tid N] message` lines, with or without the time
    stamp): a start-up whose last word is "Successfully configured all the available NVSwitches" says the service set
    the fabric up, and this check passes on it.

    Fabric Manager of another version than the loaded kernel module (its installed package, `nvidia-fabricmanager-
    <branch>` or `nvidia-fabric-manager`, or the version its own log names, against /proc/driver/nvidia/version or
    nvidia-smi) does not start: critical wherever it is needed (SXM GPUs or an NVSwitch board shown, its unit down,
    its error lines, CUDA's 802), a warning where nothing shows the platform, information beside GPUs of no NVSwitch
    board; a unit shown running is the machine's word that it started.

    A program's error 802 with nothing about the service itself (CUDA's runtime API: the system is not yet ready, a
    driver daemon it needs is not running) is named by the platform the evidence shows: on an NVSwitch system
    (eight SXM GPUs in nvidia-smi's list, NVSwitches on the bus, an HGX/DGX name or a cloud instance type) Fabric
    Manager is the cause; where nothing shows the platform it is the usual cause, and the two looks that decide it
    (`systemctl status nvidia-fabricmanager`, `nvidia-smi -q | grep -A2 -i fabric`) come first; where the GPUs shown
    are no NVSwitch board's (a GeForce or PCIe card) it is only the hypothesis, with those two looks and nothing to
    install. With the unit shown active, the GPUs did not join the fabric it set up: reset them and restart it.

    CUDA failing to initialise in other words (PyTorch's "Unexpected error from cudaGetDeviceCount()" or
    `torch.cuda.is_available()` False, "no CUDA-capable device is detected" while nvidia-smi lists the GPUs, a framework
    seeing no GPU) on an NVSwitch system the evidence shows (eight SXM GPUs of one board in nvidia-smi's list, NV12 or
    NV18 between every pair in `nvidia-smi topo -m`, NVSwitches on the PCI bus, a system or cloud instance name such as
    p4d/p5, ND A100 v4, a2/a3-highgpu-8g), with nothing in the evidence naming another cause (a CPU-only PyTorch, a
    driver too old for the program's CUDA): Fabric Manager leads under this check, unconfirmed, with the two looks that
    decide it first; so does the reporter's story that a job starts on one GPU but not on all of them together
    ("multi-card training will not start"). Where the platform or the failure is only the reporter's words, it is at
    most a warning. PCIe
    cards (L40S, GeForce, A100 PCIe with or without an NVLink bridge) and single-GPU instances never get it.

    Why it matters:
    Without Fabric Manager no CUDA context can be created on those GPUs: every job fails at start,
    although nvidia-smi lists the GPUs.

    How to fix:
    Install the Fabric Manager package of exactly the driver's version (`nvidia-fabricmanager-<branch>`,
    the same full version as `cat /sys/module/nvidia/version`), then
    `sudo systemctl enable --now nvidia-fabricmanager` and read `journalctl -u nvidia-fabricmanager`.
    On NVLink 5 systems: `sudo modprobe ib_umad` (and list it in /etc/modules-load.d), install nvlsm, then
    start the service again.

    A pasted status of the nvidia-fabricmanager unit alone ("Unit nvidia-fabricmanager.service could
    not be found", inactive or failed) with nothing that says which GPUs the host has: a warning that
    names the condition (Fabric Manager is needed on NVSwitch systems); with NVSwitches on the bus or
    SXM GPUs it is critical, with PCIe GPUs shown it is quiet. The reporter's words ("nvidia-fabricmanager
    is not installed", "the fabric manager isn't running") give the same unit state where no listing of
    the unit does; a finding that rests on the words alone is at most a warning, and quotes them.

    Exceptions:
    PCIe GPUs and NVLink bridges between pairs of GPUs need no Fabric Manager.
    """
    lines = lines_for(snapshot, "GH210")
    # Fabric Manager's own [ERROR] lines that name no known cause (a symptom row, GH806's): a fault of the fabric
    # only with other evidence
    logged = [m for m in snapshot.messages or () if m.signature == FM_LOG_ERROR]
    cuda = snapshot.cuda
    state = cuda.fabricmanager_active if cuda else None
    errors = cuda.fabricmanager_errors if cuda else ()
    # NVSwitches on the bus, SXM GPUs, or a board a program's output shows (eight H20s print no SXM word)
    switch = (nvswitch_present(snapshot) or any(_SXM.search(g.name or "") for g in snapshot.gpus)
              or _shown_nvswitch_board(snapshot) is not None or None)
    unjoined = [g for g in snapshot.gpus if (g.fabric_state or "").lower() in _UNJOINED or registration_failed(g)]
    nothing_to_do = list(dict.fromkeys([e for e in errors if "NOTHING_TO_DO" in e]
                                       + [m.line for m in snapshot.messages or () if "NOTHING_TO_DO" in m.line]))
    board = _shown_nvswitch_board(snapshot) if nothing_to_do else None
    if nothing_to_do and (unjoined or board or any(_NVLINK5.search(g.name or "") for g in snapshot.gpus)):
        # Fabric Manager found no NVSwitch, yet the GPUs are NVLink 5 ones (reached through the NVLink Subnet Manager),
        # wait to join a fabric, or make an NVSwitch board: not a system without NVSwitch, but NVSwitches Fabric
        # Manager cannot see
        yield _no_nvswitch_seen(snapshot, nothing_to_do, unjoined, board)
        return
    if any("NOTHING_TO_DO" in e for e in errors) or any("NOTHING_TO_DO" in m.line for m in lines):
        return  # Fabric Manager's own word that this system has no NVSwitch: nothing to manage
    # the reporter's words that Fabric Manager is down (knowledge/cause_phrases.csv): a unit shown running overrules
    # them, and alone they are no program's error 802
    told = [m for m in lines if m.reported and (m.signature or "").startswith(TOLD_PREFIX)]
    if told and state and state.split()[0] == "active" and not snapshot.reported_fact("cuda", "fabricmanager_active"):
        lines = [m for m in lines if m not in told]
    mismatch = _version_mismatch(snapshot) if not state or state.split()[0] != "active" else None
    if mismatch is not None:  # (a unit shown running is the machine's word that it started)
        yield _versions_differ(snapshot, mismatch, lines + logged, state, errors, switch)
        return
    evidence: list[Evidence] = []
    if state and state.split()[0] in _NOT_RUNNING and switch:
        missing = cuda is not None and cuda.fabricmanager_enabled == "not-found"
        stated = snapshot.reported_fact("cuda", "fabricmanager_active")
        evidence.append(Evidence(REPORTED_WORDS if stated else "systemctl status nvidia-fabricmanager",
                                 ("nvidia-fabricmanager.service: not found (not installed)" if missing
                                  else f"Active: {state}",)))
    if errors and switch is not False:
        evidence.append(Evidence("journalctl -u nvidia-fabricmanager", errors[:MAX_LINES]))
    if unjoined and (evidence or lines):
        evidence.append(_fabric_states(unjoined))
    if not evidence and not lines:
        if unjoined:
            yield _gpus_not_in_fabric(unjoined, logged)
        elif logged and (state is None or state.split()[0] not in _NOT_RUNNING):
            yield _fabric_manager_logged_errors(logged)
        elif state is None:
            yield Skip("needs `systemctl status nvidia-fabricmanager`, or a program's error 802")
        elif state.split()[0] in _NOT_RUNNING and snapshot.pci_devices is None and not snapshot.gpus:
            yield _fabric_manager_down_unknown_system(snapshot, state, cuda.fabricmanager_enabled if cuda else None)
        return
    reason = why_not_started(lines, errors)
    if reason is not None:
        # Fabric Manager's own words (or its start script's) say why it did not start: that reason leads, with its fix
        message, fixes = signature(reason).summary, table_fixes("GH210", kind=reason)
    elif evidence:
        message, fixes = "Fabric Manager is not running on an NVSwitch system: CUDA cannot start on its GPUs", \
            table_fixes("GH210")
    elif lines and all(m in told for m in lines):
        message, fixes = ("In the reporter's words, Fabric Manager is not running (or does not start): on an NVSwitch "
                          "system CUDA cannot start on its GPUs without it"), DECIDE_802 + table_fixes("GH210")
    else:
        message, fixes = _not_ready_802(snapshot, running=bool(state) and state.split()[0] == "active")
    shown = {line for e in evidence for line in e.lines}
    yield Draft(Severity.CRITICAL, message,
                evidence=tuple(evidence) + line_evidence([m for m in lines + logged if m.line not in shown]),
                fixes=fixes, explains=("GH610", "GH605", "GH408", "GH806"))


# The two looks that decide whether error 802 is Fabric Manager's (the NVIDIA Fabric Manager User Guide: the service,
# and the GPUs' fabric registration that CUDA waits for)
DECIDE_802 = (Fix("systemctl status nvidia-fabricmanager", "any",
                   note="decides: active (running) on an NVSwitch system; 'could not be found': not installed"),
               Fix("nvidia-smi -q | grep -A2 -i fabric", "any",
                   note="State: Completed on every GPU; In Progress or Not Started: waiting for Fabric Manager; "
                        "N/A: no NVSwitch fabric"))


def _not_ready_802(snapshot: Snapshot, running: bool = False) -> tuple[str, tuple[Fix, ...]]:
    """The message and fixes of a program's error 802 (cudaErrorSystemNotReady) with nothing about the service itself.
    CUDA's runtime API says what 802 means: the system is not yet ready, verify that all required driver daemons are
    running. On an NVSwitch system that daemon is Fabric Manager (its user guide), so the platform the evidence shows
    decides how firmly the cause is named: an NVSwitch system names it; GPUs of no NVSwitch board leave it the
    hypothesis, with the looks that decide it and no install; a platform not shown names it as the usual cause there,
    with the same looks first. With the service shown running, the GPUs did not join the fabric it set up: reset them
    and restart it (DigitalOcean's guide to error 802 on its eight-H100 Droplets)."""
    from gpuhealth.parsers.platform import nvswitch_platform, off_nvswitch

    what = "CUDA reports the system not yet initialised (error 802, cudaErrorSystemNotReady)"
    if running:
        return (f"{what} while nvidia-fabricmanager is active: the GPUs have not joined the fabric it set up (a GPU "
                "reset or a Fabric Manager restart left them out, or its version differs from the driver's)",
                (DECIDE_802[1], Fix("sudo nvidia-smi -r", "any", disruptive=True,
                                     note="resets the GPUs (and NVSwitches); no process may hold them"),
                 Fix("sudo systemctl restart nvidia-fabricmanager", "any", disruptive=True),
                 Fix("sudo tail -n 50 /var/log/fabricmanager.log", "any",
                     note="a version line ('driver interface version ... don't match') says to align the versions")))
    platform = nvswitch_platform(snapshot)
    if platform is not None:
        told = " (the reporter's words)" if platform.reported else ""
        return (f"{what} on {platform.name} ({one_line(platform.shown)[:80]}{told}): Fabric Manager is not running "
                "or not of the driver's version, and CUDA does not start on an NVSwitch system until it has set the "
                "fabric up", DECIDE_802 + table_fixes("GH210"))
    off = off_nvswitch(snapshot)
    if off is not None:
        return (f"{what}: CUDA waits for a driver daemon that is not running. On an NVSwitch system (HGX/DGX) that is "
                f"Fabric Manager, but {one_line(off)}, GPUs of no NVSwitch board, so Fabric Manager is only the "
                "hypothesis (a VM given part of an HGX board would show its SXM GPUs): the two looks below decide it",
                DECIDE_802)
    return (f"{what}: CUDA waits for a driver daemon that is not running; on an NVSwitch system (HGX/DGX: eight "
            "SXM GPUs, cloud instances such as p4d/p5, ND A100 v4/ND H100 v5, a2/a3) that is Fabric Manager, not "
            "running or not of the driver's version. Which GPUs this host has is not in the evidence: the two looks "
            "below decide it",
            DECIDE_802 + table_fixes("GH210"))


def why_not_started(lines: list[MessageLine], errors: tuple[str, ...]) -> str | None:
    """The catalogue row (signatures.csv) of the first line that says why Fabric Manager did not start (a missing
    prerequisite, an NVSwitch missing from the topology): a GH210 row with fixes of its own (``GH210:<row id>`` in
    knowledge/fixes.csv). The unit's journal lines count too, where the catalogue did not see them as lines."""
    from gpuhealth.knowledge.fixes import fixes_of  # read on first use: only a GH210 finding asks
    from gpuhealth.knowledge.signatures import match_line

    rows = [signature(m.signature) for m in lines if m.signature]
    rows += [row for row in map(match_line, errors) if row is not None]
    return next((row.id for row in rows if row.code == "GH210" and fixes_of(f"GH210:{row.id}")), None)


FM_LOG_ERROR = "fm-log-error"  # signatures.csv: any [ERROR] line of Fabric Manager's own log
# nvidia-smi -q "Fabric / State" of a GPU that has not (yet) registered with the NVLink fabric ("Completed" has; "N/A":
# no NVSwitch fabric)
_UNJOINED = ("in progress", "not started")
# nvidia-smi -q "Fabric / Status" of a registration that completed: "Success", else the NVML error it ended with
# (nvmlGpuFabricInfo_t: the status is to be read only once the state is complete; NVML API Reference, Fabric
# definitions)
_REGISTERED = ("success", "n/a", "")
# NVLink 5 GPUs (HGX/DGX B200 and B300, GB200/GB300 NVL): Fabric Manager needs the NVLink Subnet Manager there
_NVLINK5 = lazy_re(r"\bG?B[23]00\b")


def registration_failed(gpu: Gpu) -> bool:
    """nvidia-smi -q shows the GPU's fabric registration completed with an error (State "Completed", Status not
    "Success"): the GPU is outside the fabric, as one still waiting is."""
    return ((gpu.fabric_state or "").lower() == "completed"
            and (gpu.fabric_status or "").strip().lower() not in _REGISTERED)


def _fabric_shown(gpu: Gpu) -> str:
    """The GPU's fabric registration as nvidia-smi -q shows it: its State, and the Status of one that failed."""
    return f"{gpu.fabric_state}, Status: {gpu.fabric_status}" if registration_failed(gpu) else f"{gpu.fabric_state}"


def _fabric_states(unjoined: list[Gpu]) -> Evidence:
    return Evidence("nvidia-smi -q (Fabric)", tuple(f"GPU {g.index}{f' ({g.name})' if g.name else ''}: State: "
                                                    f"{_fabric_shown(g)}"
                                                    for g in unjoined[:MAX_LINES]))


def _gpus_not_in_fabric(unjoined: list[Gpu], logged: list[MessageLine]) -> Draft:
    """nvidia-smi shows GPUs that have not registered with the NVLink fabric and nothing else says why: Fabric Manager
    has not set the fabric up (yet). Right after boot it may still be starting, so a warning; a registration that
    completed with an error (Status other than Success) is over, and the GPU stays out: critical."""
    states = sorted({_fabric_shown(g) for g in unjoined})
    failed = [g for g in unjoined if registration_failed(g)]
    if failed:
        return Draft(Severity.CRITICAL, f"{len(failed)} GPU(s) failed to register with the NVLink fabric (nvidia-smi "
                     f"-q Fabric State: {', '.join(states)}): they are outside the fabric Fabric Manager set up, and "
                     "CUDA cannot use them until they are reset and registered again (Fabric Manager's log says why)",
                     evidence=(_fabric_states(unjoined),) + line_evidence(logged),
                     fixes=(Fix("sudo tail -n 50 /var/log/fabricmanager.log", "any", note="why the GPU was refused"),
                            Fix("sudo nvidia-smi -r", "any", disruptive=True,
                                note="resets the GPUs (and NVSwitches); no process may hold them"),
                            Fix("sudo systemctl restart nvidia-fabricmanager", "any", disruptive=True)),
                     explains=("GH610", "GH605", "GH408", "GH806"))
    return Draft(Severity.WARNING, f"{len(unjoined)} GPU(s) have not joined the NVLink fabric (nvidia-smi -q Fabric "
                 f"State: {', '.join(states)}): Fabric Manager has not set it up (not running, still starting, or on "
                 "an NVLink 5 system without its NVLink Subnet Manager), and CUDA reports 'system not yet initialized' "
                 "(802) on them until it has",
                 evidence=(_fabric_states(unjoined),) + line_evidence(logged), fixes=table_fixes("GH210"),
                 explains=("GH610", "GH605", "GH408", "GH806"))


# Fabric Manager's package: Debian's and the CUDA repository's nvidia-fabricmanager-<branch> (nvidia-fabricmanager from
# R580), RHEL's nvidia-fabric-manager (NVIDIA Fabric Manager User Guide, Installation)
_FM_PACKAGE = lazy_re(r"^nvidia-fabric-?manager(?:-\d{3})?$")


def _version_mismatch(snapshot: Snapshot) -> tuple[str, str, str, str] | None:
    """(Fabric Manager's version, where it was read, the loaded driver's, where) when a program's output shows both
    and they differ: Fabric Manager checks the driver's version at start and exits on any other (its user guide).
    Its own log's version line first, then its installed package."""
    from gpuhealth.checks.cuda import module_version
    from gpuhealth.checks.driver import driver_version_of

    driver = module_version(snapshot)
    if not driver:
        return None
    found: tuple[str, str] | None = None
    if snapshot.cuda and snapshot.cuda.fabricmanager_version:
        found = (snapshot.cuda.fabricmanager_version, "Fabric Manager's log")
    for package in snapshot.host_env.packages if snapshot.host_env and not found else ():
        version = driver_version_of(package.version)
        if version and _FM_PACKAGE.match(package.name):
            found = (version, f"{package.name} {package.version}")
            break
    if found is None or found[0] == driver:
        return None
    where = ("/proc/driver/nvidia/version" if snapshot.driver and snapshot.driver.version
             else snapshot.sources.get("smi", "nvidia-smi"))
    return found[0], found[1], driver, where


def _versions_differ(snapshot: Snapshot, mismatch: tuple[str, str, str, str], lines: list[MessageLine],
                     state: str | None, errors: tuple[str, ...], switch: bool | None) -> Draft:
    """Fabric Manager of another version than the loaded driver: it does not start. A fault wherever Fabric Manager is
    needed (an NVSwitch board shown, its unit down, its errors, CUDA's 802); with no platform shown, a warning that
    names the condition; with GPUs of no NVSwitch board, information (it is not needed there)."""
    from gpuhealth.parsers.platform import off_nvswitch

    fm, fm_where, driver, driver_where = mismatch
    down = bool(state) and state.split()[0] in _NOT_RUNNING
    off = off_nvswitch(snapshot)
    if switch or lines or errors or down:
        severity = Severity.CRITICAL
    else:
        severity = Severity.INFO if off else Severity.WARNING
    message = (f"Fabric Manager {fm} is not the loaded driver's version ({driver}): it checks the driver's version at "
               "start and exits on any other, and on an NVSwitch system CUDA reports 'system not yet initialized' "
               "(802) until it runs")
    if off:
        message += f"; {one_line(off)}, GPUs of no NVSwitch board, which need no Fabric Manager"
    evidence = (Evidence(fm_where, (f"Fabric Manager {fm}",)), Evidence(driver_where, (f"driver {driver}",)))
    return Draft(severity, message, evidence=evidence + line_evidence(lines),
                 fixes=table_fixes("GH210", kind="fm-driver-interface-mismatch"),
                 explains=("GH610", "GH605", "GH408", "GH806"))


def _shown_nvswitch_board(snapshot: Snapshot) -> str | None:
    """The NVSwitch system a program's output shows (eight SXM GPUs of one board, NVSwitches on the bus, a system or
    instance name printed), in words; None when none is shown or only a person's words name one."""
    from gpuhealth.parsers.platform import nvswitch_platform

    platform = nvswitch_platform(snapshot)
    if platform is None or platform.reported:
        return None
    return f"{platform.name} ({one_line(platform.shown)[:80]})"


def _no_nvswitch_seen(snapshot: Snapshot, nothing_to_do: list[str], unjoined: list[Gpu],
                      board: str | None = None) -> Draft:
    """NV_WARN_NOTHING_TO_DO (Fabric Manager found no NVSwitch) on NVLink 5 GPUs, beside GPUs waiting to join the
    fabric, or on a system the evidence shows to be an NVSwitch board. On NVLink 5 systems the NVSwitches are reached
    through the NVLink Subnet Manager, which then is not running; elsewhere the NVSwitches are missing from the PCI bus
    or their driver did not take them (or Fabric Manager runs where they are not: a VM given the GPUs only)."""
    evidence = (Evidence("Fabric Manager", tuple(nothing_to_do[:MAX_LINES])),)
    evidence += (_fabric_states(unjoined),) if unjoined else ()
    explains = ("GH610", "GH605", "GH408", "GH806")
    if any(_NVLINK5.search(g.name or "") for g in snapshot.gpus):
        return Draft(Severity.CRITICAL, "Fabric Manager found no NVSwitch (NV_WARN_NOTHING_TO_DO) on an NVLink 5 "
                     "system: there it reaches the NVSwitches through the NVLink Subnet Manager (nvlsm, which needs "
                     "ib_umad), so nvlsm is not installed or not running; the GPUs stay out of the fabric and CUDA "
                     "reports 'system not yet initialized' (802)",
                     evidence=evidence, fixes=table_fixes("GH210", kind="fm-nvlsm-missing"), explains=explains)
    where = (f"while {len(unjoined)} GPU(s) wait to join the NVLink fabric" if unjoined
             else f"on {board}, whose GPUs talk through NVSwitches")
    return Draft(Severity.CRITICAL, f"Fabric Manager found no NVSwitch (NV_WARN_NOTHING_TO_DO) {where}: the NVSwitches "
                 "are missing from the PCI bus or their driver did not take them (on NVLink 5 systems: the NVLink "
                 "Subnet Manager is not running; in a VM given the GPUs only, Fabric Manager belongs on the host), "
                 "and CUDA reports 'system not yet initialized' (802) until they are set up",
                 evidence=evidence, fixes=table_fixes("GH210", kind="fm-nvswitch-topology-mismatch"),
                 explains=explains)


def _fabric_manager_logged_errors(logged: list[MessageLine]) -> Draft:
    """Fabric Manager's log holds [ERROR] lines no catalogue row explains, and nothing says it is down: it is
    Fabric Manager's word (not an unknown line), worth a warning; whether it still runs decides what it means."""
    first = one_line(logged[0].line.split("] ", 3)[-1])[:200]
    return Draft(Severity.WARNING, f"Fabric Manager logged {len(logged)} error line(s) that name no known cause: "
                 f"{first}", evidence=line_evidence(logged), fixes=table_fixes("GH210", kind=FM_LOG_ERROR),
                 explains=("GH806",))


def _fabric_manager_down_unknown_system(snapshot: Snapshot, state: str, enabled: str | None) -> Draft:
    """The unit is missing, inactive or failed and nothing in the evidence says what GPUs the host has: a person
    asks about Fabric Manager on an NVSwitch system, where this is why CUDA cannot start, so it is a warning that
    names the condition, not a fault the evidence proves."""
    missing = enabled == "not-found"
    what = ("is not installed (its unit could not be found)" if missing else "failed" if state.startswith("failed")
            else f"is not running ({state})")
    shown = "nvidia-fabricmanager.service: not found (not installed)" if missing else f"Active: {state}"
    return Draft(Severity.WARNING, f"Fabric Manager {what}: on an NVSwitch system (HGX/DGX) CUDA cannot start on "
                 "its GPUs until it runs; whether this host has NVSwitches is not in the evidence given",
                 evidence=(Evidence(snapshot.sources.get("cuda", "systemctl status nvidia-fabricmanager"), (shown,)),),
                 fixes=table_fixes("GH210"), explains=("GH610", "GH605", "GH408", "GH806"))


# --------------------------------------------------------------------------- GH414

HELD_SHARE = 0.5  # of the GPU's memory
HELD_MIN_MIB = 1024


@check("GH414", "memory-held-idle", "GPU memory held by processes at 0 % utilisation", requires=("gpus",))
def memory_held_idle(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A GPU has at least half of its memory (and at least 1 GiB) in use while its utilisation is 0 %,
    in nvidia-smi's output. The processes listed on it are named; when none is listed, the memory is
    held by processes nvidia-smi cannot see (another container's, or leftovers of a crashed job).

    Why it matters:
    The next job on that GPU fails with "CUDA out of memory" although nothing seems to run. Leftover
    DataLoader workers or zombie processes of a killed job are the usual holders.

    How to fix:
    Find the holders with `sudo fuser -v /dev/nvidia*` (or lsof on the same files) and end them;
    `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv` lists those the driver
    sees. If the memory stays held with no process, reset the GPU (`sudo nvidia-smi -r -i <index>`) or
    reboot.

    Exceptions:
    A job between steps, a notebook holding a model, or an inference server waiting for requests
    holds memory at 0 % on purpose: the finding is a warning to look, not a fault. Display
    processes are not counted.
    """
    for gpu in snapshot.gpus:
        used, total, util = gpu.memory_used_mib, gpu.memory_total_mib, gpu.utilization_gpu_pct
        if used is None or total is None or util is None or total <= 0:
            continue
        if util > 0 or used < max(HELD_MIN_MIB, HELD_SHARE * total):
            continue
        compute = [p for p in gpu.processes if (p.type or "C") != "G"]
        if gpu.processes and not compute:
            continue  # only display clients
        holders = ", ".join(f"{p.name or '?'} (pid {p.pid}, {p.used_memory_mib or '?'} MiB)" for p in compute[:4])
        who = f"held by {holders}" if holders else "no process listed: held by processes nvidia-smi does not see"
        yield Draft(Severity.WARNING, f"GPU {gpu.index} holds {used:.0f} of {total:.0f} MiB at 0 % utilisation; {who}",
                    subject=snapshot.gpu_subject(gpu.pci_address),
                    evidence=(Evidence(snapshot.sources.get("smi", "nvidia-smi"),
                                       (f"GPU {gpu.index}: {used:.0f}MiB / {total:.0f}MiB, GPU-Util {util:.0f}%",)),),
                    fixes=table_fixes("GH414"))


# --------------------------------------------------------------------------- GH612

_LIBRARY = lazy_re(r"\b(lib[\w+-]+\.so(?:\.\d+)*)|\b(GLIBCXX_[\d.]+)|\b(cuSPARSE|cuDNN|cuBLAS|cuFFT)\b")


@check("GH612", "cuda-library-missing", "The dynamic loader cannot find a CUDA library", requires=("messages",))
def cuda_library_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A program could not load a CUDA library: "libcudnn.so.8: cannot open shared object file",
    TensorFlow's "Could not load dynamic library 'libcublas.so.11'", an undefined symbol in
    libcublasLt or libnvJitLink, or "version `GLIBCXX_3.4.30' not found". The lines come from pasted
    evidence matched by the signature catalogue (`gpuhealth analyze`).

    Why it matters:
    The framework then falls back to the CPU or stops. The library is either not installed, another
    CUDA version's copy is found first, or it is installed where the loader does not look.

    How to fix:
    Look for it: `ldconfig -p | grep -E 'libcudnn|libcublas|libnvJitLink|libcudart'` and
    `echo "${LD_LIBRARY_PATH-}"`. Install the version the framework was built for (pip wheels: the
    `nvidia-cudnn-cu12` package and friends; system: the `libcudnn` package of the CUDA major
    version), or remove the other CUDA from `LD_LIBRARY_PATH`. For GLIBCXX, use a newer libstdc++
    (conda's `libstdcxx-ng`) or the system one.

    Exceptions:
    TensorFlow's optional TensorRT libraries (libnvinfer) only cost speed. `gpuhealth check` reads
    no program output, so there it is skipped.
    """
    if snapshot.messages is None:
        yield Skip("only with a program's output (gpuhealth analyze)")
        return
    lines = lines_for(snapshot, "GH612")
    harmless = [m for m in lines if _not_a_fault(m)]
    lines = [m for m in lines if not _not_a_fault(m)]
    if harmless and not lines:
        # WSL's ldconfig warning: the loader still finds libcuda; say so instead of "cannot load".
        yield Draft(Severity.INFO, signature(harmless[0].signature).summary, evidence=line_evidence(harmless))
        return
    if not lines:
        return
    names = []
    for message in lines:
        for m in _LIBRARY.finditer(message.line):
            name = next(g for g in m.groups() if g)
            if name not in names and "stub" not in name:
                names.append(name)
    what = ", ".join(names[:4]) if names else "a CUDA library"
    optional = names and all(n.startswith("libnvinfer") for n in names)
    severity = Severity.WARNING if optional else _severity(lines)
    if names and all(n in _UNVERSIONED_DRIVER_LIBS for n in names):
        yield Draft(severity, f"The program asks for {what}, the driver library's development name without a "
                              "version; the driver installs the versioned name (.so.1)",
                    evidence=line_evidence(lines), fixes=_unversioned_fixes(names[0]), explains=("GH203",))
        return
    yield Draft(severity, f"The dynamic loader cannot load {what}", evidence=line_evidence(lines),
                fixes=table_fixes("GH612"),
                explains=("GH610", "GH605", "GH806"))


# The driver's libraries a program may dlopen by their unversioned development name; the driver's
# packages (and NVIDIA's NVML documentation) use the .so.1 name, and a distribution often ships no link.
_UNVERSIONED_DRIVER_LIBS = ("libnvidia-ml.so",)


def _not_a_fault(message: MessageLine) -> bool:
    row = signature(message.signature) if message.signature else None
    return row is not None and row.severity == "info" and row.summary.startswith("Not a fault")


def _unversioned_fixes(name: str) -> tuple[Fix, ...]:
    return (slotted("ldconfig -p | grep {file}", note=f"{name}.1 listed without {name}: only the link is missing",
                    file=name),
            slotted("sudo ln -s /usr/lib/x86_64-linux-gnu/{file}.1 /usr/lib/x86_64-linux-gnu/{file}",
                    "debian", note="or make the program load the .so.1 name", file=name),
            slotted("sudo ln -s /usr/lib64/{file}.1 /usr/lib64/{file}", "rhel",
                    note="or make the program load the .so.1 name", file=name))


# --------------------------------------------------------------------------- GH706


@check("GH706", "p2p-blocked-iommu-acs", "NCCL/P2P fails with the IOMMU or PCIe ACS in the way",
       reads=("messages",))
def p2p_blocked_iommu_acs(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A multi-GPU job hangs or NCCL/peer-to-peer transfers fail ("NCCL WARN", an all-reduce that never
    finishes, a hang that `NCCL_P2P_DISABLE=1` works around) on a host where PCIe ACS redirects
    peer traffic (`ACSCtl: ... ReqRedir+ CmpltRedir+` on the bridges above the GPUs) or the IOMMU
    is on (`intel_iommu=on`, `amd_iommu=on`, "DMAR: IOMMU enabled").
    What CUDA's peer-to-peer samples measured decides first (checks/peer.py): a PCIe GPU pair whose
    `p2pBandwidthLatencyTest` "P2P=Enabled" bandwidth is below half of its "P2P=Disabled" bandwidth
    (the copy staged through host memory, which a working direct path never trails; NCCL's maintainers
    read "very low" P2P-enabled bandwidth as ACS, NVIDIA/nccl#199) is a warning, critical with ACS
    redirection or the IOMMU shown beside it; `simpleP2P` reading data back wrong after a peer copy is
    critical. Pairs joined by NVLink (`topo -m` NV#, `topo -p2p n` OK) and pairs without peer access
    are not judged.

    Why it matters:
    With ACS redirection or the IOMMU translating, GPU peer-to-peer writes are sent up to the root
    complex, where they are blocked or crawl: NCCL hangs or reads garbage. It is a host setting, not
    a GPU or NCCL fault.

    How to fix:
    On bare metal, disable ACS on the PCIe switches/bridges above the GPUs (`setpci` on each bridge,
    or a BIOS option such as "ACS Control: Disabled"), and boot with `iommu=pt` or the IOMMU off
    (VT-d / AMD-Vi disabled) unless a VM needs it. The guide's command,
    `sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000`, does not persist across reboots. Check with
    `nvidia-smi topo -p2p r`, `p2pBandwidthLatencyTest` and NCCL's `all_reduce_perf`.
    `NCCL_P2P_DISABLE=1` is a slow workaround.

    Exceptions:
    Virtual machines with GPU passthrough need the IOMMU on the hypervisor; inside the VM,
    peer-to-peer then depends on the hypervisor's ACS setup.
    """
    p2p = snapshot.p2p
    if p2p is None:
        yield Skip("needs NCCL/P2P output together with lspci -vvv (ACSCtl) or the kernel command line")
        return
    failures = p2p.failures + tuple(e.message for e in snapshot.app_errors or () if e.kind == "nccl")
    cmdline = snapshot.host_env.kernel_cmdline if snapshot.host_env else None
    iommu = p2p.iommu + tuple(w for w in (cmdline or "").split() if w in ("intel_iommu=on", "amd_iommu=on"))
    blockers = p2p.acs_redirect + iommu
    if p2p.tests:  # what CUDA's P2P samples measured decides before any setting does (checks/peer.py)
        measured = _measured_p2p(snapshot, failures, blockers)
        if measured is not None:
            yield measured
            return
    if not blockers and not p2p.acs_read and cmdline is None:
        # a failure alone (a hang told in words, an NCCL WARN) says nothing of the setting: the cause stays open
        yield Skip("the evidence shows no PCIe ACS setting (lspci -vvv's ACSCtl) and no kernel command line")
        return
    if not blockers or not (failures or p2p.acs_redirect):
        return  # the IOMMU alone is a common default; it matters once peer-to-peer fails
    what = "PCIe ACS redirects peer traffic" if p2p.acs_redirect else "the IOMMU is on"
    if failures:
        severity = Severity.CRITICAL
        message = f"NCCL/P2P fails and {what}: GPU peer-to-peer goes through the root complex"
    else:
        severity = Severity.WARNING
        message = f"{what}: GPU peer-to-peer will go through the root complex (NCCL hangs)"
    yield Draft(severity, message,
                evidence=tuple(e for e in (Evidence("NCCL / P2P", failures[:4]),
                                           Evidence("lspci -vvv / kernel", blockers[:MAX_LINES])) if e.lines),
                fixes=_acs_fixes(snapshot),
                explains=("GH806", "GH702"))


def _acs_fixes(snapshot: Snapshot) -> tuple[Fix, ...]:
    from gpuhealth.checks.peer import acs_fixes  # the bridges lspci -vvv shows redirecting, each its setpci

    return acs_fixes(snapshot, table_fixes("GH706"))


def _measured_p2p(snapshot: Snapshot, failures: tuple[str, ...], blockers: tuple[str, ...]) -> Draft | None:
    """GH706's finding from p2pBandwidthLatencyTest or simpleP2P: P2P-enabled copies far slower than staged ones on
    PCIe pairs (warning; critical with ACS redirection or the IOMMU shown), or wrong data after a peer copy
    (critical). None when the samples measured nothing wrong."""
    from gpuhealth.checks.peer import P2P_SLOW_FRACTION, slow_pairs, tests_source, wrong_data

    found, wrong = slow_pairs(snapshot), wrong_data(snapshot)
    slow = [line for _, line in found]
    if not slow and not wrong:
        return None
    what = "PCIe ACS redirects peer traffic" if snapshot.p2p and snapshot.p2p.acs_redirect else "the IOMMU is on"
    if wrong:
        message = "GPU peer-to-peer copies return wrong data (simpleP2P's check failed)"
    else:
        message = (f"P2P-enabled copies are below {P2P_SLOW_FRACTION:.0%} of the bandwidth staged through the host "
                   f"between {len({pair for pair, _ in found})} GPU pair(s) (p2pBandwidthLatencyTest): {slow[0]}")
    message += (f"; {what}, so GPU peer-to-peer goes through the root complex" if blockers else
                "; the documented cause is PCIe ACS or the IOMMU sending peer traffic through the root complex")
    severity = Severity.CRITICAL if wrong or blockers else Severity.WARNING
    return Draft(severity, message,
                 evidence=tuple(e for e in (Evidence(tests_source(snapshot), tuple(wrong[:MAX_LINES])),
                                            Evidence(tests_source(snapshot), tuple(slow[:MAX_LINES])),
                                            Evidence("NCCL / P2P", failures[:4]),
                                            Evidence("lspci -vvv / kernel", blockers[:MAX_LINES])) if e.lines),
                 fixes=_acs_fixes(snapshot), explains=("GH806", "GH702"))
