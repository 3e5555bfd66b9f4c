"""GPUs and NVIDIA driver versions named in a line of text no parser read (GH209 holds one against the other).

- A driver, from the names the package managers print: a Debian package file or ``dpkg`` line with its version
  (``libgl1-nvidia-glx_343.22-2_amd64.deb``, ``version 343.22-2 of libnvidia-eglcore already installed``), or a
  package whose name carries the branch (Ubuntu ``nvidia-driver-470``, ``libnvidia-gl-535``; Debian
  ``nvidia-legacy-340xx-driver``, ``nvidia-tesla-470-driver``; NVIDIA's branch pinning package
  ``nvidia-driver-pinning-580``, which its repositories use from the 590 renames on (NVIDIA Driver Installation
  Guide, "Recent Updates: Version locking packages"); Arch ``nvidia-470xx-dkms``; RPM Fusion
  ``akmod-nvidia-390xx``).
- A GPU, from its PCI ID (``10de:0612``, as lspci -nn and the driver's messages write it), or from a model name in
  a person's words ("NVIDIA 9800GTX+", "a Tesla K80"), through the names of ``knowledge/legacy.py`` (only GPUs that
  have a last branch are named there).

``named_gpus`` reads the GPU models a text names with their counts ("on 8x H20", "2x RTX 3090", "a Tesla P4 in a
desktop", "my GTX 1080 Ti") and each one's product line (knowledge/gpu_models.csv): the one reader of "model (and
count) named" that GH608's count, the NVSwitch platform, forward compatibility and the fan checks use.

A version or package named in a sentence ("I installed nvidia-driver-470") and every GPU named by its model are the
reporter's words (``Mention.reported``): nobody saw the machine print them.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Mention, NamedGpu

__all__ = ["command_mentions", "mentions", "named_gpus"]

MAX_LINE = 300  # a line is read up to here: names sit near the start of installer and package lines
MAX_WORDS = 60
MAX_NGRAM = 4  # the longest model name a person types: "GeForce GTX 750 Ti", "Quadro FX 4600 SDI"

# a package file or dpkg/apt line: the package name, then its version after "_" (file) or " " (dpkg -l, apt list)
_PACKAGE_VERSION = lazy_re(
    r"(?<![\w.+-])(?P<package>(?:lib)?[\w.+-]*nvidia[\w.+-]*?)(?:_|:\w+\s+|\s+|/\S+\s+)"
    r"(?P<version>\d{2,3}\.\d{1,3}(?:\.\d{1,3})?)(?=[-_+~.:\s]|$)", re.IGNORECASE)
_DPKG_VERSION_OF = lazy_re(r"\bversion (?P<version>\d{2,3}\.\d{1,3}(?:\.\d{1,3})?)\S* of (?P<package>\S*nvidia\S*)",
                           re.IGNORECASE)
# packages that are not the driver, though their names say nvidia (their versions are theirs: 1.17, 12.4, 2.21)
_NOT_THE_DRIVER = lazy_re(r"cuda|container|docker|toolkit|ctk|nsight|cudnn|nccl|tensorrt|dali|jetpack|l4t|"
                          r"prime|bumblebee|primus|detect|installer-|firmware-\d|system-monitor|vaapi|egl-wayland|"
                          r"egl-gbm|egl-x11|nvtop|gpustat|pynvml|ml-py|smi-\w", re.IGNORECASE)
_BRANCH_IN_NAME = lazy_re(
    r"(?<![\w.-])(?:(?:nvidia-(?:driver|utils|dkms|kernel-source|kernel-common|compute-utils|headless(?:-no-dkms)?)"
    r"|libnvidia-(?:gl|compute|decode|encode|extra|fbc1|cfg1|common|ifr1)|xserver-xorg-video-nvidia"
    r"|linux-(?:modules|objects|signatures)-nvidia)-(?P<ubuntu>\d{3})(?![\d.])"
    r"|nvidia-legacy-(?P<legacy>\d{3})xx|nvidia-tesla-(?P<tesla>\d{3})(?![\d.])"
    r"|nvidia-driver-pinning-(?P<pin>\d{3})"
    r"|(?:akmod-|kmod-|xorg-x11-drv-)?nvidia-(?P<xx>\d{3})xx)", re.IGNORECASE)
# the forms other than a package manager's: NVIDIA's installer file (``NVIDIA-Linux-x86_64-510.47.03.run``, as its
# download page names it), an RPM's name-version-release (``kmod-nvidia-latest-dkms-550.54.15-1.el8.x86_64``,
# ``nvidia-driver-3:550.54.15-1.el9``, NVIDIA's CUDA repository for RHEL), the CUDA repository's driver metapackage
# (``cuda-drivers-510``, ``cuda-drivers 510.47.03-1``, ``cuda-drivers=510.47.03-1``), NVIDIA's driver container
# image (``nvcr.io/nvidia/driver:535.104.05-ubuntu22.04``) and the GPU Operator's ``driver.version=535.104.05``
_RUNFILE = lazy_re(r"NVIDIA-Linux-(?:x86_64|aarch64|x86|ppc64le|armv7l-gnueabihf)-"
                   r"(?P<version>\d{3}\.\d{2,3}(?:\.\d{2})?)(?![\d])", re.IGNORECASE)
_RPM_VERSION = lazy_re(r"(?<![\w.+-])(?P<package>(?:lib)?[\w+-]{0,40}?nvidia[\w+-]{0,40}?)-(?:\d{1,2}:)?"
                       r"(?P<version>\d{3}\.\d{2,3}(?:\.\d{2})?)-\d", re.IGNORECASE)
_CUDA_DRIVERS = lazy_re(r"(?<![\w.-])cuda-drivers(?:-(?P<branch>\d{3}))?(?:(?:_|=|:\w+\s+|\s+)"
                        r"(?P<version>\d{3}\.\d{2,3}(?:\.\d{2})?))?(?![\w.]*\d)", re.IGNORECASE)
# a program's or a script's own line naming it: "Installing NVIDIA driver 510.47.03", "NVIDIA driver version:
# 535.104.05", and the variable installers and driver containers take (DRIVER_VERSION=, NVIDIA_DRIVER_VERSION=)
_DRIVER_NAMED = lazy_re(r"(?:\bnvidia[ -]driver(?:[ -]version)?:?\s{1,3}v?|(?<![A-Za-z])(?:NVIDIA_)?DRIVER_VERSION"
                        r"\s?[=:]\s?[\"']?)(?P<version>\d{3}\.\d{2,3}(?:\.\d{2})?)(?![\d.]*\d)", re.IGNORECASE)
_DRIVER_IMAGE = lazy_re(r"(?:\bnvidia/driver:|\bdriver\.version=)(?P<version>\d{3}\.\d{2,3}(?:\.\d{2})?)(?![\d])",
                        re.IGNORECASE)
# a machine image (AMI, cloud image, container tag) whose name carries the driver: ``ubuntu-2004-nvidia-510``,
# ``dl-base-nvidia-driver-535-20240101``, ``nvidia_535.104.05``: "nvidia" then a three-digit branch inside one name
_IMAGE_NAME = lazy_re(r"(?<![\w.])[\w.]{0,40}?(?<![a-z])nvidia[-_](?:driver[-_])?[rv]?(?P<branch>\d{3})"
                      r"(?P<rest>(?:[._]\d{2,3}){0,2})(?=[-_/:\s\"',)]|$)", re.IGNORECASE)
# Google Cloud's accelerator types name the GPU model (cloud.google.com/compute/docs/gpus: nvidia-tesla-k80, -p100)
_ACCELERATOR = lazy_re(r"(?<![\w.])nvidia-tesla-(?P<model>[a-z]\d{1,3}[a-z]?)(?![\w.])", re.IGNORECASE)
_PCI_ID = lazy_re(r"(?<![\w:])10de:(?P<device>[0-9a-f]{4})(?![0-9a-f])", re.IGNORECASE)
_FIRST_PERSON = lazy_re(r"\b(?:i|i'm|i've|i'd|my|we|we've|our|me)\b", re.IGNORECASE)
_WORD = lazy_re(r"[^\s,;()\[\]\"'`|]+")


def mentions(line: str, source: str = "") -> list[Mention]:
    """The drivers and GPUs one line names (empty for most lines); ``source`` names where the line stands."""
    text = line.strip()[:MAX_LINE]
    if not text or not any(c.isdigit() for c in text):  # every version, PCI ID and model name has a digit
        return []
    lowered = text.lower()
    found: list[Mention] = []
    if ("nvidia" in lowered or "cuda-drivers" in lowered or "driver.version" in lowered
            or "driver_version" in lowered) \
            and not _NO_SUCH_PACKAGE.search(text):
        words = _sentence(text)
        found += [Mention("driver", version, named, text, source, reported=words) for named, version in _drivers(text)]
    if "10de:" in lowered:
        found += [Mention("gpu", m["device"].lower(), m[0], text, source) for m in _PCI_ID.finditer(text)]
    if "nvidia-tesla-" in lowered:  # a cloud's accelerator type (GCP: --accelerator=type=nvidia-tesla-k80)
        found += [Mention("gpu", " ".join(devices), m[0], text, source, reported=_sentence(text))
                  for m in _ACCELERATOR.finditer(text) if (devices := _devices_named(f"Tesla {m['model']}"))]
    if not any(m.what == "gpu" for m in found):
        found += [Mention("gpu", " ".join(devices), named, text, source, reported=True)
                  for named, devices in _gpu_names(text)]
    return found


def _devices_named(name: str) -> tuple[str, ...]:
    from gpuhealth.knowledge.legacy import devices_named

    return devices_named(name)


def _sentence(text: str) -> bool:
    """Whether the line reads as a person's sentence rather than a program's output."""
    return bool(_FIRST_PERSON.search(text)) or (text[-1:] in ".?!" and len(text.split()) >= 6)


def _drivers(text: str) -> list[tuple[str, str]]:
    found = _named_forms(text)
    if found:
        return found[:4]
    for match in (*_PACKAGE_VERSION.finditer(text), *_DPKG_VERSION_OF.finditer(text)):
        if not _NOT_THE_DRIVER.search(match["package"]) and int(match["version"].split(".")[0]) >= 60:
            found.append((match[0].strip(), match["version"]))
    if not found:
        for match in _BRANCH_IN_NAME.finditer(text):
            branch = match["ubuntu"] or match["legacy"] or match["tesla"] or match["xx"] or match["pin"]
            found.append((match[0], branch))
    if not found:
        found = [(m[0], m["branch"] + m["rest"].replace("_", ".")) for m in _IMAGE_NAME.finditer(text)
                 if not _NOT_THE_DRIVER.search(m[0])]
    return list(dict.fromkeys(found))[:4]


# a version a line asks for, or one it leaves, rather than has: "requires NVIDIA driver 525.60.13 or newer", "minimum
# driver_version", "downgraded from NVIDIA driver 535.183.01", "removing NVIDIA driver 510.47.03"
_ASKS_BEFORE = lazy_re(r"(?:requir|need|minimum|at least|built for|support|compatib|recommend|upgrade to|download|"
                       r"\bfrom\b|instead of|uninstall|remov|purg|replac)", re.IGNORECASE)
_ASKS_AFTER = lazy_re(r"^\S*\s{0,3}(?:\+|or (?:newer|later|higher|above)|and (?:newer|later|above)|is required)",
                      re.IGNORECASE)


def _required(text: str, match: re.Match[str]) -> bool:
    return bool(_ASKS_BEFORE.search(text[max(0, match.start() - 40):match.start()])
                or _ASKS_AFTER.match(text[match.end():match.end() + 24]))


def _named_forms(text: str) -> list[tuple[str, str]]:
    """(words, version or branch) from an installer file, an RPM, the CUDA repository's driver metapackage, the driver
    container's image: each names the driver by itself, so no other form is read beside it."""
    found = [(m[0], m["version"]) for m in _RUNFILE.finditer(text)]
    found += [(m[0], m["version"]) for m in _DRIVER_IMAGE.finditer(text)]
    found += [(m[0].strip(), m["version"]) for m in _DRIVER_NAMED.finditer(text) if not _required(text, m)]
    found += [(m[0].strip(), m["version"] or m["branch"]) for m in _CUDA_DRIVERS.finditer(text)
              if m["version"] or m["branch"]]
    if "-" in text:
        found += [(m[0], m["version"]) for m in _RPM_VERSION.finditer(text)
                  if not _NOT_THE_DRIVER.search(m["package"])]
    return list(dict.fromkeys(found))


def _gpu_names(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """(words, device IDs) for each GPU model named, longest name first at each word. Each word's name key is made
    once; a run of words is named by the keys joined (what the whole run's key is)."""
    from gpuhealth.knowledge.legacy import devices_keyed, name_starts, word_key

    # words with a letter or digit: a table's "|" or a sentence's "." between words is no part of a name
    words = [m[0].rstrip(".:!?") for m in _WORD.finditer(text) if any(c.isalnum() for c in m[0])][:MAX_WORDS]
    keys = [word_key(w) for w in words]
    digits = [any(c.isdigit() for c in w) for w in words]
    starts = name_starts()
    found: list[tuple[str, tuple[str, ...]]] = []
    at = 0
    while at < len(words):
        if keys[at] not in starts and words[at].lower() not in _FAMILY:
            at += 1
            continue
        for size in range(min(MAX_NGRAM, len(words) - at), 0, -1):
            if not any(digits[at:at + size]) or not _model_like(words[at:at + size]):
                continue
            devices = devices_keyed("".join(keys[at:at + size]))
            if devices:
                found.append((" ".join(words[at:at + size]), devices))
                at += size - 1
                break
        at += 1
    return found[:4]


_FAMILY = frozenset({"geforce", "quadro", "tesla", "nvidia", "titan", "nvs", "grid", "riva"})


def _model_like(words: list[str]) -> bool:
    """A model name has a model number with letters beside it ("9800GTX+", "GTX 770", "K80"), or starts with a family
    word ("GeForce 210"): a bare number ("210", "770") names nothing."""
    if not any(any(c.isdigit() for c in w) for w in words):
        return False
    if words[0].lower() in _FAMILY:
        return True
    joined = "".join(words)
    return any(c.isalpha() for c in joined) and len(joined) >= 3


MAX_MENTIONS = 40


def mention_overlay(lines: list[str], source: str) -> dict[str, tuple[Mention, ...]]:
    """The snapshot overlay (``mentioned``) for the lines of a text no parser read; empty when none names anything."""
    found: dict[tuple[str, str], Mention] = {}  # each GPU and each driver once, where it is first named
    for line in lines:
        for mention in mentions(line, source):
            seen = found.get((mention.what, mention.value))
            if seen is None or (seen.reported and not mention.reported):  # a program's line over a person's words
                found[(mention.what, mention.value)] = mention
        if len(found) >= MAX_MENTIONS:
            break
    return {"mentioned": tuple(found.values())[:MAX_MENTIONS]} if found else {}


COMMANDS_TYPED = "the commands typed"


# a package manager's answer that the package named is not there: "E: Unable to locate package nvidia-driver-510"
_NO_SUCH_PACKAGE = lazy_re(r"Unable to locate package|has no installation candidate|No match for argument|"
                           r"Unable to find a match|No package \S+ available|is not available|is not installed|"
                           r"not found")
# what apt, dnf/yum and NVIDIA's installer print when the install named did not happen
_INSTALL_FAILED = lazy_re(r"Unable to locate package|has no installation candidate|No match for argument|"
                          r"Unable to find a match|No package \S+ available|^E: |^ERROR: |^Error: |"
                          r"installation (?:has )?failed|Installation failed", re.MULTILINE)


def command_mentions(typed: list[tuple[str, str]]) -> dict[str, tuple[Mention, ...]]:
    """The overlay for the commands of a pasted session, each with the head of its output: the driver an install
    command names (``sh NVIDIA-Linux-x86_64-510.47.03.run``, ``apt-get install cuda-drivers-510``, ``dnf install
    kmod-nvidia-latest-dkms-...``) unless its output says the install failed ("Unable to locate package", "No match
    for argument", "ERROR: Installation has failed"), and the GPUs a command names
    (``--accelerator=type=nvidia-tesla-k80``). Of several drivers installed one after another, the last is the one in
    place."""
    found: list[Mention] = []
    for command, output in typed[:MAX_MENTIONS]:
        named = mentions(command, COMMANDS_TYPED)
        if any(m.what == "driver" for m in named) and _INSTALL_FAILED.search(output[:2000]):
            named = [m for m in named if m.what != "driver"]
        found += named
    drivers = [m for m in found if m.what == "driver"]
    gpus = list({m.value: m for m in found if m.what == "gpu"}.values())
    chosen = (*drivers[-1:], *gpus)
    return {"mentioned": chosen} if chosen else {}


# --------------------------------------------------------------------------- models and counts named

MAX_NAMED_LINES = 400
MAX_NAMED = 8
_COUNT_WORDS = {"one": 1, "single": 1, "a single": 1, "two": 2, "dual": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "sixteen": 16}
# the count before a name: "8x H20", "8 x H100", "8xH100", "two RTX 3090", "4 NVIDIA A100", Chinese "8张H20", "8卡H800"
# (a measure word: 张/張 sheets, 块/塊 pieces, 卡 cards); after it: "RTX 3090 x2"
_COUNT_BEFORE = lazy_re(r"(?:(?<![\w.])(?P<n>\d{1,2})\s?[x×*]\s?|(?<![\w.])(?P<w>\d{1,2}|one|two|three|four|five|six|"
                        r"seven|eight|sixteen|dual|a single|single)[\s-]"
                        r"|(?<![A-Za-z0-9.])(?P<c>\d{1,2})\s?[张張块塊卡]\s?)(?:(?:nvidia|tesla|geforce)\s)?$", re.I)
_COUNT_AFTER = lazy_re(r"^\s?[x×*]\s?(?P<n>\d{1,2})(?![\w.])", re.I)
# a short name ("T4", "A10", "H20") names a GPU beside NVIDIA/Tesla before it, or GPU/card after it
_FAMILY_BEFORE = lazy_re(r"\b(?:nvidia|tesla)\s$", re.I)
_GPU_AFTER = lazy_re(r"^(?:'?s)?\s(?:tensor\score\s)?(?:gpus?|cards?|boards?|accelerators?)\b", re.I)
# what makes a model no GPU of this host: a purchase or a wish, a condition, a past one, another machine's
_NOT_THIS_HOST = lazy_re(r"\b(?:buy|buying|purchas\w*|order(?:ing)?|upgrad\w* to|plan(?:ning)? to|planned|"
                         r"considering|thinking (?:of|about)|want(?:s|ed)? to (?:get|buy|use|try|rent)|wish|should i|"
                         r"recommend\w*|rent(?:ing)?|quote|if (?:i|you|we|they)|would|used to|previously|formerly|"
                         r"replaced|swapped out|sold|another (?:machine|server|box|node|host|pc|computer)|"
                         r"(?:other|second|different|old) (?:machine|server|box|node|host|pc|computer|laptop)|"
                         r"on (?:my|our|a|the) laptop|colleague|friend)\b", re.I)
# a comparison beside the name: "faster than an A100", "A100 vs H100", "like an A100"
_COMPARED_BEFORE = lazy_re(r"\b(?:than|vs\.?|versus|compared (?:to|with)|like|unlike|similar to|or)\s(?:an?\s|the\s|"
                           r"my\s|our\s)?(?:\d{1,2}\s?x\s?)?$", re.I)
_COMPARED_AFTER = lazy_re(r"^(?:'?s)?\s(?:vs\.?|versus|or)\b", re.I)
_SENTENCE_SPLIT = lazy_re(r"(?<=[.!?;])\s+")


def named_gpus(text: str, source: str = "") -> tuple[NamedGpu, ...]:
    """The GPU models ``text`` names in sentences and lines other than nvidia-smi's GPU list, each once (the first
    naming with a count, else the first), with the count the words give. A question, a purchase or wish, a
    condition, a comparison ("faster than an A100"), a past GPU or another machine's ("on my laptop it works")
    names no GPU of this host."""
    if not isinstance(text, str):
        return ()
    found = _named_in(text)
    return tuple(dataclasses.replace(g, source=source) for g in found) if source else found


@functools.lru_cache(maxsize=32)
def _named_in(text: str) -> tuple[NamedGpu, ...]:
    """``named_gpus`` without a source: a piece is read for the GPUs it names and for the GPU count (prose.py) once."""
    from gpuhealth.knowledge.gpu_models import HINTS, models, pattern

    source = ""

    rows = models()
    found: dict[str, NamedGpu] = {}
    for line in text.splitlines()[:MAX_NAMED_LINES]:
        line = line[:MAX_LINE]
        lowered = line.lower()
        if not any(h in lowered for h in HINTS) or not any(c.isdigit() for c in line):
            continue
        stripped = line.strip()
        if stripped.startswith(("|", "GPU ")) or "(UUID:" in line:  # nvidia-smi's table and -L list: the driver's
            continue
        for sentence in _SENTENCE_SPLIT.split(stripped):
            if sentence.endswith("?") or not any(h in sentence.lower() for h in HINTS):
                continue
            for named in _in_sentence(sentence, rows, pattern(), source):
                key = named.named.lower().removesuffix("s").removesuffix("'")  # "H20s" is "H20"
                seen = found.get(key)
                if seen is None or (seen.count is None and named.count is not None):
                    found[key] = named
            if len(found) >= MAX_NAMED:
                break
    return tuple(found.values())[:MAX_NAMED]


def _in_sentence(sentence: str, rows: tuple, names: re.Pattern[str], source: str) -> list[NamedGpu]:
    found: list[NamedGpu] = []
    elsewhere = None
    for tried, match in enumerate(names.finditer(sentence)):
        if tried >= MAX_NAMED:  # a sentence naming more models than this is a list or a hostile line, not a host
            break
        row = rows[int(match.lastgroup[1:])] if match.lastgroup else None
        if row is None:
            continue
        before, after = sentence[max(0, match.start() - 30):match.start()], sentence[match.end():match.end() + 30]
        counted = _COUNT_BEFORE.search(before)
        counted_after = None if counted else _COUNT_AFTER.search(after)
        if not row.alone and not (counted or counted_after or _FAMILY_BEFORE.search(before)
                                  or match.group(0).lower().startswith("tesla") or _GPU_AFTER.search(after)):
            continue
        if _COMPARED_BEFORE.search(before) or _COMPARED_AFTER.search(after):
            continue
        if elsewhere is None:
            elsewhere = bool(_NOT_THIS_HOST.search(sentence))
        if elsewhere:
            return []
        count = None
        if counted is not None:
            word = (counted["n"] or counted["w"] or counted["c"]).lower()
            count = int(word) if word.isdigit() else _COUNT_WORDS.get(" ".join(word.split()))
        elif counted_after is not None:
            count = int(counted_after["n"])
        found.append(NamedGpu(row.model, match.group(0).strip(), row.line, row.form, row.passive, row.board,
                              count or None, sentence[:300], source))
    return found
