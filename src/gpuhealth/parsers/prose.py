"""State stated in a person's words: versions, NVIDIA units, PCIe links, install-time states (kernel headers, Secure
Boot and the MOK, the module list, Docker's runtime), packages installed or removed, as people write them in a
report.

"My CUDA version is 12.9.41 and my CUDA driver is 570.133.20", "ubuntu20.04+nvidia530.30+cuda12.1",
"nvidia-persistenced isn't running", "the GPU is stuck at Gen2 x16". No program printed these: they are
the reporter's words, and the caller marks what it fills from them as *reported*.

Each reader takes a text and returns what its sentences *state about the present*: a question ("is it
installed?"), a condition ("if the fabric manager is not running"), a requirement ("needs driver 525 or
newer"), a negation ("not driver 535") and the past ("was using 470", "upgraded from 470") state nothing.
Where the words name two values for one thing and do not say which is current, nothing is stated.

Chinese is read too ("驱动版本 535.104.05", "CUDA 版本是 12.1", "没有安装 nvidia-fabricmanager", "链路宽度是 x4，
本来应该是 x16"): a sentence ends at 。！？； as well, one with CJK characters is a person's (the tools gpuhealth reads
print English) unless it asks (吗, 是否, 是不是), and requirements (需要, 以上), conditions (如果) and the past (之前)
state nothing, as in English. Latin words are bounded by Latin letters, not ``\b``, which sees none before a CJK
character.

Pure functions, text in, values out; never raises on any text. Lines are cut at ``MAX_LINE`` characters
and at most ``MAX_LINES`` are read; every pattern is bounded, so each reader is linear in its input.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["INSTALL_PATTERNS", "InstallStatement", "LibraryPathStatement", "PackageStatement", "PcieStatement",
           "Stated", "UnitStatement", "gpu_count_statements", "install_statements", "library_path_statements",
           "package_statements", "pcie_statements", "persons_line", "prose_sentences", "unit_statements",
           "version_statements"]

MAX_LINES = 2000
MAX_LINE = 2000
MAX_SENTENCES = 4000

# a sentence ends at . ! ? ; followed by a blank (not inside "12.9.41"), or at the end of its line
_SENTENCE_END = lazy_re(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*")
# markdown's emphasis and code marks: "`nvidia-fabricmanage`r is not installed", "**Gen2 x16**", "__x__" (an
# underscore inside a word, x86_64, stays)
_MARKUP = lazy_re(r"`{1,3}|\*{1,3}(?=\S)|(?<=\S)\*{1,3}|(?<!\w)_{1,3}(?=\S)|(?<=\S)_{1,3}(?!\w)")
# a person's sentence, not a program's line: it has a pronoun or a verb people write ("my CUDA version is 12.9",
# "I'm on driver 580", "CUDA 12.4 with driver 535"), or is an item of a list or form people fill ("- Driver: 535",
# "OS: Ubuntu 22.04"), or versions joined by "+" ("ubuntu20.04+nvidia530.30+cuda12.1"). "DKMS make.log for
# nvidia-535.98 for kernel 6.4.6" (a program's header line) is none of these.
_PERSON = lazy_re(r"\b(?:i|i'm|im|my|we|our|me|us|you|your|it|its|this|these|there|here|is|are|am|was|were|be|been|"
                  r"have|has|had|did|using|use|uses|running|run|runs|installed|install|upgraded|updated|downgraded|"
                  r"show|shows|say|says|report|reports|returns|prints|nothing|stuck|only|currently|now|still|seems?|got|get|gets|tried|"
                  r"but|so|also|after|since|while|because|with|on)\b", re.I)
# a Chinese question without a question mark: 吗, 是否, 是不是, 会不会, 有没有
_QUESTION_ZH = lazy_re(r"[吗嗎]|是否|是不是|[会會]不[会會]|有[没沒]有|能不能|[?？]$")
_FORM_ITEM = lazy_re(r"^(?:[-*•]\s|\d{1,2}[.)]\s|[A-Za-z][\w /()-]{0,30}:\s)")
_JOINED = lazy_re(r"^[\w.-]{1,40}(?:\+[\w.-]{1,40}){1,8}$")
# "isn't" -> "is not": one spelling of the negation for the patterns below
_CONTRACTION = lazy_re(r"\b(is|are|was|were|does|do|did|has|have|had|could|can|wo)n[’']?t\b", re.I)
_QUESTION_START = lazy_re(r"^\W{0,4}(?:is|are|does|do|did|should|shall|can|could|would|will|which|what|how|why|"
                          r"where|has|have|any(?:one|body)|may i|am i)\b(?!\s+not\b)", re.I)


def prose_sentences(text: str) -> list[str]:
    """The sentences a person wrote in ``text``, markdown emphasis and code marks removed, contractions spelt out,
    each one line; questions (ending in ``?`` or opening with "is", "does", "should" ...) and a program's lines
    (no word a person writes, see ``_PERSON``) are left out."""
    if not isinstance(text, str):
        return []
    sentences: list[str] = []
    for raw in text.splitlines()[:MAX_LINES]:
        line = _CONTRACTION.sub(r"\1 not", _MARKUP.sub("", raw[:MAX_LINE].replace("×", "x")))
        for sentence in _SENTENCE_END.split(line):
            sentence = " ".join(sentence.split())
            if sentence and not sentence.endswith("?") and not _QUESTION_START.match(sentence) and (
                    _PERSON.search(sentence) or _FORM_ITEM.match(sentence) or _JOINED.match(sentence)
                    or _chinese_statement(sentence)):
                sentences.append(sentence)
        if len(sentences) >= MAX_SENTENCES:
            break
    return sentences[:MAX_SENTENCES]


# --------------------------------------------------------------------------- a person's line about an error

# What a program prints at the start of its error line: a level ("ERROR:", "E:", "[ERROR]", "Error!", "FATAL"), a
# program's name before its level ("modprobe: ERROR:", "nvidia-installer: error:"), a timestamp or a kernel record, a
# Python exception's name ("RuntimeError: ..."), NVRM, NCCL, logrus and klog prefixes. A line with one is a program's,
# whatever words follow.
_PROGRAM_MARK = lazy_re(
    r"^\W{0,4}(?:(?:error|err|fatal|warning|warn|critical|panic|e|w|f)\s{0,2}[\]:!]|"
    r"[\w.\-/\[\]]{1,60}:\s{0,2}(?:error|fatal|warning|critical)\b|\[?\s{0,4}\d{1,10}\.\d{3,9}\]|\d{4}-\d\d-\d\d|"
    r"\d\d:\d\d:\d\d|[\w.]{0,80}(?:Error|Exception|Warning)\b|NVRM|NCCL|ERRO\[|[EWF]\d{4} |Traceback\b|"
    r"[IWEF]\d{0,4}\s{1,2}[\w./-]{1,200}:\d{1,6}\])", re.I)
# a program's marks anywhere on the line: the driver's prefix, syslog's "host kernel:" and "program[pid]:", the
# journal's "Dec 07 10:00:01" (the driver's own lines say "we": "after we tried to train it to Gen2")
_PROGRAM_ANYWHERE = lazy_re(r"\bNVRM:|\bkernel:\s|\b[\w.-]{1,60}\[\d{1,8}\]:\s|^[A-Z][a-z]{2}\s{1,2}\d{1,2}\s"
                            r"\d\d:\d\d:\d\d\b")
# a program's message carried inside a person's sentence: an exception's name ("... raises RuntimeError"), an error
# code ("error 12", "exit code 139", "status=0x2", "(err -22)"), a program's constant (CUDA_ERROR_UNKNOWN,
# NCCL_SYSTEM_ERROR) or errno's name (ENODEV), a hexadecimal code, a quoted span ("...", '...', “...”)
_CARRIED = lazy_re(
    r"\b[A-Z]\w{0,80}(?:Error|Exception|Fault)\b|"
    r"\b(?i:error|err|errno|code|status|rc|exit\s{1,3}code|return\s{1,3}code)\s{0,3}[=:#(]?\s{0,3}-?(?:0x[0-9a-fA-F]{1,16}|"
    r"\d{1,6})\b|"
    r"\b[A-Z][A-Z0-9]{0,20}_[A-Z0-9_]{2,60}\b|\bE(?:PERM|NOENT|NODEV|NXIO|IO|ACCES|BUSY|INVAL|NOMEM|AGAIN|NOSPC|"
    r"NOEXEC|NOSYS|NOTSUP|OPNOTSUPP|TIMEDOUT|FAULT|BADF|XIST)\b|\b0x[0-9a-fA-F]{4,16}\b|"
    r"\"[^\"]{3,500}\"|“[^”]{3,500}”|(?:^|(?<=[\s(\[:=]))'[^']{3,500}'(?=$|[\s).,:;!?\]])")
# after a colon inside the line ("my trainer then stops with: FATAL: ..."), the words a program printed: they hold an
# error word of their own (a label's value in a list item is the reporter's: "- Operating system: Ubuntu (same error)")
_ERROR_WORDS = lazy_re(r"\b(?:error|errors|exception|fail\w{0,4}|fatal|cannot|can't|couldn't|unable|refused|denied|"
                       r"not\s{1,3}found|no\s{1,3}such|invalid|timed\s{1,3}out|abort\w{0,2}|panic)\b", re.I)
# a markdown list item of the reporter's: a label of words, then its value ("- Operating system: Ubuntu 24.04 (same
# error on 22.04)", "* GPU: 2x A100"); a label that is itself an error word ("- Error: ...") quotes a program
_BULLET_ITEM = lazy_re(r"^\s{0,3}(?:[-*+•]|\d{1,2}[.)])\s{1,3}(?P<label>[A-Za-z][\w /()-]{0,40}?)\s{0,2}:\s{1,3}"
                       r"(?P<value>\S.{0,2000})")
_ERROR_LABEL = lazy_re(r"\b(?:error|errors|exception|fail\w{0,4}|fatal|message|output|log|traceback)\b", re.I)
# the person speaking: "I", "we", "my", "our" (programs speak of "you" and "your": nvidia-installer's "your kernel")
_FIRST_PERSON = lazy_re(r"(?:(?<![\w'-])I(?=\s|['’])|\b(?:[Mm]y|[Ww]e|[Ww]e're|[Ww]e've|[Oo]ur)\b)")
# a sentence that introduces the paste below it ("errors like the following are produced:", "Evidence:", "the log
# shows this:"); Python's own "The above exception was the direct cause of the following exception:" is none
_INTRODUCES = lazy_re(r"\b(?:like\s{1,3}(?:the\s{1,3}following|this|these|below)|as\s{1,3}follows|such\s{1,3}as|"
                      r"similar\s{1,3}to|below|evidence|e\.g\.|for\s{1,3}example|for\s{1,3}instance|"
                      r"here\s{1,3}is|here\s{1,3}are|attached)\b", re.I)


def persons_line(line: str) -> bool:
    """Whether ``line`` is a person's sentence about an error, not a program's error line: a list item of the
    reporter's ("- Operating system: Ubuntu 24.04 (same error on 22.04)"), a sentence that introduces a paste ("When
    loading the module, errors like the following are produced:", "Evidence:"), or one in which the person speaks
    ("we traced the failure to the hardware"). A line that opens as a program's does (a level, a program's name and
    its level, a timestamp, an exception's name) is a program's, whatever it says, and so is a sentence that carries a
    program's message: after a colon ("my trainer stops with: FATAL: ..."), in quotes or backticks, an error code
    ("error 12"), a program's constant (CUDA_ERROR_UNKNOWN) or an exception's name inside."""
    if not isinstance(line, str):
        return False
    text = line.strip()[:MAX_LINE]
    if not text or "`" in text or _PROGRAM_MARK.match(text) or _PROGRAM_ANYWHERE.search(text):
        return False
    item = _BULLET_ITEM.match(text)
    if item:
        return not _ERROR_LABEL.search(item["label"]) and not _carries_message(item["value"])
    if _carries_message(text) or _after_colon_error(text):
        return False
    if text.endswith((":", "：")) and (_FIRST_PERSON.search(text) or _INTRODUCES.search(text)):
        return True
    return _FIRST_PERSON.search(text) is not None and len(text.split()) >= 4


def _carries_message(text: str) -> bool:
    """Whether ``text`` holds a program's message: one opening after a colon as a program's line does, or a mark of
    one anywhere (an exception's name, an error code, a constant, a quoted span)."""
    rest = _after_colon(text)
    return _CARRIED.search(text) is not None or (bool(rest) and _PROGRAM_MARK.match(rest) is not None)


def _after_colon_error(text: str) -> bool:
    """Whether words after a colon inside ``text`` hold an error word: "it stops with: the runtime refused to
    start" quotes what the program printed."""
    rest = _after_colon(text)
    return bool(rest) and _ERROR_WORDS.search(rest) is not None


def _after_colon(text: str) -> str:
    """The words after the first colon and space inside ``text`` (empty when the colon ends it)."""
    at = text.find(": ")
    return text[at + 2:].strip() if at >= 0 else ""


def _chinese_statement(sentence: str) -> bool:
    """Whether a sentence is a person's statement in Chinese: the tools gpuhealth reads print English, so a sentence
    with CJK characters is a person's words; a question ("驱动版本是 535 吗") states nothing."""
    return _CJK.search(sentence) is not None and _QUESTION_ZH.search(sentence) is None


_CJK = lazy_re(r"[\u3400-\u9fff]")


def _before(sentence: str, start: int, width: int = 48) -> str:
    return sentence[max(0, start - width):start].lower()


# --------------------------------------------------------------------------- versions


@record
class Stated:
    """One version a person's words state: ``thing`` is "driver" (the NVIDIA driver), "cuda" (a CUDA toolkit or
    runtime), "driver-cuda" (the CUDA Version nvidia-smi prints: the newest the driver supports), "distro"
    (``name`` is os-release's ID) or "kernel"."""

    thing: str
    value: str
    words: str  # the sentence that states it
    name: str = ""


# the words tie the number to the thing: "driver 535", "NVIDIA driver version is 570.133.20", "nvidia530.30",
# "NVRM version: 550.54.14"; a major of three digits (NVIDIA's driver branches), so "NVIDIA 4090" is no driver
_DRIVER = lazy_re(r"(?<![\w/.-])(?:nvidia[- ]?driver|driver|nvrm|nvidia)(?:[- ]?(?:version|ver\.?|branch|series))?"
                  r"(?:\s{1,3}(?:is|was|of|at|now|currently|installed|=|:)){0,3}"
                  r"(?P<change>\s{1,3}from\s{1,3}v?\d{3}[\d.]{0,8}\s{1,3}to)?\s{0,3}[:=]?[ -]{0,3}v?"
                  r"(?P<v>[2-9]\d\d(?:\.\d{1,3}){0,2})(?![\w.]{0,3}\d)", re.I)
# a driver branch as NVIDIA names it: "the R470 branch", "R535 drivers", "the 470.xx legacy driver", "the 510 driver"
# (a branch word after the number: "R740" alone is a server model, "770 driver" after a GPU series word is a GPU's)
_BRANCH_WORDS = lazy_re(r"(?<![\w/.-])(?:(?<!gtx )(?<!gts )(?<!gt )(?<!rtx )(?<!quadro )(?<!nvs )(?<!titan )"
                        r"(?:r(?P<r>[2-9]\d\d)|(?P<xx>[2-9]\d\d)\.xx|(?<=the )(?P<n>[2-9]\d\d)))"
                        r"(?=(?:\s{1,3}(?:legacy|nvidia|production|proprietary|open))?\s{1,3}"
                        r"(?:branch|drivers?|series|release)\b)", re.I)
# "CUDA 12.4", "cuda12.1", "CUDA toolkit 11.8", "nvcc 12.1", "CUDA Version: 12.2" (then "driver-cuda" by context);
# not "CUDA driver 570" (the driver), not a path (/usr/local/cuda-12.1: another reader's)
_CUDA = lazy_re(r"(?<![\w/.-])(?P<what>cuda[- ]?toolkit|cudatoolkit|cuda[- ]runtime|nvcc|cuda)"
                r"(?P<label>[- ]?version)?(?:\s{1,3}(?:is|was|of|at|now|currently|installed|release|=|:)){0,3}"
                r"(?P<change>\s{1,3}from\s{1,3}v?\d{1,2}\.[\d.]{1,8}\s{1,3}to)?\s{0,3}[:=]?[ _-]{0,3}v?"
                r"(?P<v>(?:[7-9]|1[0-3])\.\d{1,2}(?:\.\d{1,3})?)(?![\w.]{0,3}\d)", re.I)
_DISTRO = lazy_re(r"(?<![\w/.-])(?P<name>ubuntu|debian|rhel|red hat enterprise linux|centos(?: stream)?|"
                  r"rocky(?: linux)?|alma ?linux|fedora|sles|suse linux enterprise server|opensuse leap|"
                  r"amazon linux|oracle linux)"
                  r"[ -]{0,3}(?:(?:server|release|version|linux)\s{1,3}){0,2}"
                  r"(?P<v>\d{1,2}(?:\.\d{1,2})?)(?:\.\d{1,2})?(?![\w.]{0,3}\d)", re.I)
_DISTRO_IDS = {"ubuntu": "ubuntu", "debian": "debian", "rhel": "rhel", "red hat enterprise linux": "rhel",
               "centos": "centos", "centos stream": "centos", "rocky": "rocky", "rocky linux": "rocky",
               "almalinux": "almalinux", "alma linux": "almalinux", "fedora": "fedora", "sles": "sles",
               "suse linux enterprise server": "sles", "opensuse leap": "opensuse-leap", "amazon linux": "amzn",
               "oracle linux": "ol"}
_DISTRO_LIKE = {"ubuntu": ("debian",), "centos": ("rhel", "fedora"), "rocky": ("rhel", "centos", "fedora"),
                "almalinux": ("rhel", "centos", "fedora"), "ol": ("fedora",), "amzn": ("centos", "rhel", "fedora")}
# "kernel 6.8.0-45-generic", "linux-image-5.15.0-105-generic", "kernel version 5.14.0-427.el9.x86_64"
_KERNEL = lazy_re(r"(?<![\w/.-])(?:kernel|linux-image|linux)(?:[- ]?(?:version|release))?"
                  r"(?:\s{1,3}(?:is|was|of|at|now|=|:)){0,3}[\s:=-]{0,3}"
                  r"(?P<v>[2-7]\.\d{1,2}\.\d{1,3}(?:-[\w.+~]{1,60}){0,4})", re.I)
# what makes a version in a sentence not the present state of this host
_NEGATED = lazy_re(r"\b(?:not|no|without|instead of|rather than|except|than|unlike|vs\.?|versus)\s+(?:\S+\s+){0,2}$")
_REQUIRED = lazy_re(r"\b(?:requires?|required|needs?|needed|minimum|at least|recommends?|recommended|supports?|"
                    r"supported|compatible|works? with|built for|compiled for|download|>=|≥)\b[^,]{0,40}$")
_FROM = lazy_re(r"\bfrom\s+(?:\S+\s+){0,2}$")
# the words between "to" and the match hold no number: in "the kernel went from 3.0.0-24 to 3.0.0-25 my driver 295.59
# broke" the "to" is the kernel's, not the driver's
_CURRENT = lazy_re(r"\b(?:to|now|currently|current|now on|running)\s+(?:[^\s\d]\S*\s+){0,2}$")
# "I installed driver 304.43 (and it worked)": the person put it there, so it is the present one, unless the sentence
# is about the past ("I had installed driver 470 before")
_INSTALLED = lazy_re(r"\b(?:i|we)\s+(?:then\s+|finally\s+|just\s+)?(?:re)?installed\s+(?:[^\s\d]\S*\s+){0,2}$", re.I)
_PAST = lazy_re(r"\b(?:previously|formerly|used to|originally|earlier|old|older|before|was using|had|tried)\b", re.I)
_OR_NEWER = lazy_re(r"^\s{0,2}(?:\+(?!\w)|(?:or|and)\s+(?:newer|later|above|higher|up|greater))", re.I)
_CONDITION = lazy_re(r"\b(?:if|when|whether|unless|once|until|should|would|could)\b")


def version_statements(text: str) -> tuple[Stated, ...]:
    """The NVIDIA driver, CUDA, distribution and kernel versions the sentences of ``text`` state as this host's
    present ones: at most one per thing. Where several values of one thing are named, the one the words make
    current ("upgraded to 550", "now on 550") is taken; otherwise two different values state nothing."""
    found: dict[str, list[tuple[Stated, bool]]] = {}
    for sentence in prose_sentences(text):
        for stated, current in _sentence_versions(sentence):
            found.setdefault(stated.thing, []).append((stated, current))
    return tuple(chosen for entries in found.values() if (chosen := _decide(entries)) is not None)


def _sentence_versions(sentence: str) -> list[tuple[Stated, bool]]:
    out: list[tuple[Stated, bool]] = []
    past = bool(_PAST.search(sentence))
    spans: list[tuple[int, int]] = []
    for match in _DRIVER.finditer(sentence):
        spans.append(match.span("v"))
        out += _judged(sentence, match, "driver", match["v"], past)
    if "r" in sentence.lower() or ".xx" in sentence:
        for match in _BRANCH_WORDS.finditer(sentence):
            value = match["r"] or match["xx"] or match["n"]
            if not any(a <= match.start() < b or match.start() <= a < match.end() for a, b in spans):
                spans.append(match.span())
                out += _judged(sentence, match, "driver", value, past)
    for match in _CUDA.finditer(sentence):
        if any(a <= match.start("v") < b for a, b in spans):
            continue
        thing = "driver-cuda" if _driver_cuda(sentence, match) else "cuda"
        out += _judged(sentence, match, thing, match["v"], past)
    for match in _DISTRO.finditer(sentence):
        name = _DISTRO_IDS.get(" ".join(match["name"].lower().split()), "")
        out += _judged(sentence, match, "distro", match["v"], past, name=name)
    for match in _KERNEL.finditer(sentence):
        out += _judged(sentence, match, "kernel", match["v"].rstrip(".-"), past)
    return out + _chinese_versions(sentence, spans)


# the same in Chinese, where the words between the thing and its number differ: "驱动版本 535.104.05",
# "NVIDIA 驱动是 550", "CUDA 版本是 12.1", "驱动从 470 升级到 535"; no blank is needed around a CJK character
_CHANGE_ZH = r"(?P<change>从\s{0,3}v?\d{1,3}[\d.]{0,8}\s{0,3}(?:升级到|升級到|更新到|降级到|降級到|换成|換成|改成|到))?"
_DRIVER_ZH = lazy_re(r"(?<![a-z0-9/.-])(?:nvidia\s?)?(?:显卡|顯卡)?(?:驱动|驅動)(?:程序|程式)?\s{0,3}的?\s{0,3}"
                     r"(?:版本号|版本號|版本)?\s{0,3}(?:是|为|為|用的是|：|:|=)?\s{0,3}" + _CHANGE_ZH +
                     r"\s{0,3}(?:nvidia[- ]?)?v?(?P<v>[2-9]\d\d(?:\.\d{1,3}){0,2})(?![\w.]{0,3}\d)", re.I)
# "CUDA 12.1" alone is the English pattern's; this one needs the Chinese words ("CUDA 版本是 12.1", "CUDA 用的是 11.8")
_CUDA_ZH = lazy_re(r"(?<![a-z0-9/.-])(?P<what>cuda[- ]?toolkit|cudatoolkit|nvcc|cuda)\s{0,3}的?\s{0,3}"
                   r"(?:(?:版本号|版本號|版本)\s{0,3}(?:是|为|為|：|:|=)?|是|为|為|用的是)\s{0,3}" + _CHANGE_ZH +
                   r"\s{0,3}v?(?P<v>(?:[7-9]|1[0-3])\.\d{1,2}(?:\.\d{1,3})?)(?![\w.]{0,3}\d)", re.I)
# what makes a version no present state, in Chinese: a requirement or support ("需要 525 以上", "最低", "支持"), a
# negation ("不是 535"), a condition ("如果"), the past ("之前用的是 470") unless made current ("现在", "升级到")
_NOT_STATE_ZH = lazy_re(r"需要|要求|至少|最低|最高|以上|支持|兼容|适配|適配|对应|對應|不是|而非|如果|假如|是否|"
                        r"下载|下載")
_NOT_STATE_AFTER_ZH = lazy_re(r"\s{0,2}(?:及|或)?(?:以上|或更高|或更新)")  # "525 以上": 525 or newer
_PAST_ZH = lazy_re(r"之前|以前|原来|原來|曾经|曾經|旧的|舊的|本来|本來")
_CURRENT_ZH = lazy_re(r"现在|現在|目前|当前|當前|升级到|升級到|更新到|换成|換成|改成")


def _chinese_versions(sentence: str, spans: list[tuple[int, int]]) -> list[tuple[Stated, bool]]:
    """The driver and CUDA versions a Chinese sentence states, as ``_sentence_versions`` gives them."""
    if _CJK.search(sentence) is None:
        return []
    out: list[tuple[Stated, bool]] = []
    past = _PAST_ZH.search(sentence) is not None
    for pattern, thing in ((_DRIVER_ZH, "driver"), (_CUDA_ZH, "cuda")):
        for match in pattern.finditer(sentence):
            if any(a <= match.start("v") < b for a, b in spans):
                continue
            before = sentence[max(0, match.start() - 24):match.start()]
            if _NOT_STATE_ZH.search(before + match.group(0)) or _NOT_STATE_AFTER_ZH.match(sentence, match.end()):
                continue
            current = _CURRENT_ZH.search(before + match.group(0)) is not None
            if past and not current:
                continue
            spans.append(match.span("v"))
            kind = "driver-cuda" if thing == "cuda" and _driver_cuda(sentence, match) else thing
            out.append((Stated(kind, match["v"], sentence[:300]), current))
    return out


_SUPPORTS = lazy_re(r"\b(?:supports?|supported|up to|max(?:imum)?)\b")


def _driver_cuda(sentence: str, match: re.Match[str]) -> bool:
    """Whether "CUDA Version 12.2" is the one nvidia-smi prints (the newest CUDA the driver supports)."""
    lowered = sentence.lower()
    return ("nvidia-smi" in lowered or "smi " in lowered or "driver version:" in lowered
            or bool(_SUPPORTS.search(_before(sentence, match.start(), 30))))


def _judged(sentence: str, match: re.Match[str], thing: str, value: str, past: bool,
            name: str = "") -> list[tuple[Stated, bool]]:
    """``[(stated, current)]``, or ``[]`` when the words around it make it no present state."""
    before = _before(sentence, match.start())
    after = sentence[match.end():match.end() + 24]
    if _NEGATED.search(before) or _REQUIRED.search(before) or _OR_NEWER.match(after) or _FROM.search(before):
        return []
    if _CONDITION.search(before[-24:]):
        return []
    current = (bool(_CURRENT.search(before)) or bool(match.groupdict().get("change"))
               or (not past and bool(_INSTALLED.search(before))))
    if past and not current:
        return []
    return [(Stated(thing, value, sentence[:300], name), current)]


def _decide(entries: list[tuple[Stated, bool]]) -> Stated | None:
    """The one value the words state: the last one made current, else the only one named (a short form such as
    "535" beside "535.104.05" is the same one); two different values state nothing."""
    current = [s for s, is_current in entries if is_current]
    if current:
        return current[-1]
    longest: Stated | None = None
    for stated, _ in entries:
        if longest is None or len(stated.value) > len(longest.value):
            longest = stated
    assert longest is not None
    same = all(_same_version(s.value, longest.value) and s.name == longest.name for s, _ in entries)
    return longest if same else None


def _same_version(short: str, full: str) -> bool:
    return full == short or full.startswith(short + ".") or full.startswith(short + "-")


def distro_like(os_id: str) -> tuple[str, ...]:
    """The ID_LIKE os-release gives for a distribution ID (the family its package commands follow)."""
    return _DISTRO_LIKE.get(os_id, ())


# --------------------------------------------------------------------------- GPU count

# How many GPUs the host has, as a person states it (GH608 holds a device index to it where no program's output lists
# the GPUs): "I have only one GPU", "my machine has 2 GPUs", "we've got two RTX 3090 GPUs", "on a single-GPU
# machine", "a server with 4 GPUs", "there is only one GPU". Between the number and "GPU" only words of a model name
# ("NVIDIA GeForce RTX 3090"): "two questions about the GPU" states no count.
_COUNT_WORDS = {"one": 1, "single": 1, "a single": 1, "only one": 1, "two": 2, "dual": 2, "three": 3, "four": 4,
                "five": 5, "six": 6, "seven": 7, "eight": 8, "sixteen": 16}
_NUMBER = r"(?P<n>a single|single|one|two|dual|three|four|five|six|seven|eight|sixteen|[1-9]|1[0-6])"
_MODEL_WORDS = (r"(?:(?:nvidia|geforce|quadro|tesla|titan|rtx|gtx|ti|super|max-q|laptop|mobile|pcie|sxm\d?|"
                r"[a-z]{0,2}\d{2,4}[a-z]{0,3}(?:\s?\d{1,3}\s?gb)?|\d{1,3}\s?gb)[\s-]{1,3}){0,5}")
_HOST = r"(?:machine|system|server|computer|pc|box|node|laptop|workstation|host|desktop|rig|setup|instance|vm)s?"
_GPU_COUNT = lazy_re(
    r"(?:\b(?:i|we|this|that|my|our|the|which)\s(?:\w{1,12}\s){0,2}?(?:only\s)?"
    r"(?:have|has|had|got|contains?|comes with|ships with)\s(?:got\s)?(?:only\s|just\s)?"
    r"|\b" + _HOST + r"\s(?:that\s)?(?:only\s)?(?:has|have|with)\s(?:only\s|just\s)?"
    r"|\bthere\s(?:is|are)\s(?:only\s|just\s)?)"
    + _NUMBER + r"(?:\s?x\s?|[\s-])[\s-]{0,2}" + _MODEL_WORDS + r"(?:nvidia\s)?gpus?\b"
    r"|\b" + _NUMBER.replace("?P<n>", "?P<m>") + r"[\s-]{1,2}gpu\s" + _HOST + r"\b", re.I)


# a number a few words before "GPU": what every count statement holds (the lines without one are not read further)
_COUNT_HINT = lazy_re(r"\b(?:one|single|two|dual|three|four|five|six|seven|eight|sixteen|\d{1,2})(?:\s?x\s?|[\s-])"
                      r"(?:[\w.()]{1,16}[\s-]{1,3}){0,5}gpu", re.I)


def gpu_count_statements(text: str) -> tuple[Stated, ...]:
    """The number of GPUs the sentences of ``text`` state this host has ("gpu-count"): at most one; two different
    numbers state nothing. A condition ("if you have one GPU"), a negation, a requirement ("needs 2 GPUs") or the
    past states no present count."""
    if not isinstance(text, str):
        return ()
    # only lines that say "GPU" and a number can state a count: the others are not split into sentences
    lines = [line for line in text.splitlines()[:MAX_LINES]
             if "gpu" in line.lower() and _COUNT_HINT.search(line[:MAX_LINE])]
    entries: list[tuple[Stated, bool]] = []
    for sentence in prose_sentences("\n".join(lines)):
        if "gpu" not in sentence.lower():
            continue
        past = bool(_PAST.search(sentence))
        for match in _GPU_COUNT.finditer(sentence):
            number = " ".join((match["n"] or match["m"]).lower().split())
            value = _COUNT_WORDS.get(number) or (int(number) if number.isdigit() else 0)
            if value:
                entries += _judged(sentence, match, "gpu-count", str(value), past)
    values = {stated.value for stated, _ in entries}
    if entries:
        return (entries[0][0],) if len(values) == 1 else ()
    return _count_of_named(text)


def _count_of_named(text: str) -> tuple[Stated, ...]:
    """The count the GPU models named with their numbers make ("2x RTX 3090" = two GPUs; "2x RTX 3090 and 2x RTX
    4090" = four), by the one reader of GPUs named (parsers/gpu_mentions.named_gpus); nothing where a model is named
    without a number (how many of it is unknown)."""
    from gpuhealth.parsers.gpu_mentions import named_gpus

    named = named_gpus(text)
    if not named or not all(g.count for g in named):
        return ()
    return (Stated("gpu-count", str(sum(g.count or 0 for g in named)), named[0].words),)


# --------------------------------------------------------------------------- units


@record
class UnitStatement:
    """What a sentence says of an NVIDIA unit: ``active`` and ``enabled`` as ``systemctl status`` would say them
    ("inactive" and "not-found" for a unit that is not installed; "failed"; "disabled")."""

    unit: str  # "nvidia-fabricmanager", "nvidia-persistenced", "docker", "nvidia-container-toolkit"
    active: str | None
    enabled: str | None
    words: str
    engines: tuple[str, ...] = ()  # the container engines the words use ("docker", "podman"), for the toolkit


# bounded by Latin letters, not \w: Chinese writes the unit against its words ("没有安装nvidia-fabricmanager")
_UNIT = lazy_re(r"(?<![a-zA-Z0-9_/.-])"
                r"(?:(?P<ctk>nvidia[- ]container[- ]toolkit|nvidia-container-runtime|nvidia-docker2?|"
                r"nvidia-ctk)|(?P<fm>nvidia[- ]?fabric[- ]?manager|nv-fabricmanager|fabric[- ]?manager)|"
                r"(?P<pd>nvidia-persistenced|persistenced|persistence daemon)|(?P<docker>docker(?:d| daemon| engine)?))"
                r"(?:\.service)?(?:\s(?:service|package|daemon|unit))?(?![a-zA-Z0-9_-])", re.I)
# the state after the unit's name: "is not installed", "isn't running" (spelt out), "seems to be missing"
_UNIT_STATE = lazy_re(r"^\s{0,2}(?:\([^()]{0,40}\)\s{0,2})?(?:(?:is|are|seems|appears|looks|has been|got|gets|keeps)"
                      r"\s{1,3}){0,2}(?:(?:to be|also|still|currently|actually|just|simply)\s{1,3}){0,2}"
                      r"(?P<state>not\s{1,3}(?:installed|present|found|available|running|started|active|enabled|"
                      r"loaded)|does\s{1,3}not\s{1,3}exist|missing|absent|uninstalled|inactive|stopped|dead|"
                      r"down|disabled|failed|failing|crash(?:es|ed|ing)?)\b", re.I)
_UNIT_STATES = {"installed": ("inactive", "not-found"), "present": ("inactive", "not-found"),
                "found": ("inactive", "not-found"), "available": ("inactive", "not-found"),
                "exist": ("inactive", "not-found"), "missing": ("inactive", "not-found"),
                "absent": ("inactive", "not-found"), "uninstalled": ("inactive", "not-found"),
                "running": ("inactive", None), "started": ("inactive", None), "active": ("inactive", None),
                "loaded": ("inactive", None), "inactive": ("inactive", None), "stopped": ("inactive", None),
                "dead": ("inactive", None), "down": ("inactive", None), "enabled": (None, "disabled"),
                "disabled": (None, "disabled"), "failed": ("failed", None), "failing": ("failed", None)}
_UNIT_CONDITION = lazy_re(r"\b(?:if|when|whether|unless|once|until|make sure|ensure|check|verify|in case|"
                          r"otherwise|without|need|needs|must|should)\b")
_PODMAN = lazy_re(r"(?<![\w-])podman(?![\w-])", re.I)
_PAST_BE = lazy_re(r"\b(?:was|were|had)\s")
_THERE_IS_NO = lazy_re(r"\bthere\s+is\s+no\s+(?:\S+\s+)?$")


def unit_statements(text: str) -> tuple[UnitStatement, ...]:
    """What the sentences of ``text`` state of the NVIDIA Fabric Manager, nvidia-persistenced, docker and the NVIDIA
    Container Toolkit now: not installed (missing, not found), not running (inactive, stopped), disabled, failed.
    The past ("was not running"), a question, a condition ("if fabric manager is not running") and a statement
    that it runs ("even though it is installed") state nothing. The last statement per unit wins. The toolkit's
    statement carries the container engines the words use ("docker run ... fails": docker)."""
    found: dict[str, UnitStatement] = {}
    engines: set[str] = set()  # a container engine the words use ("docker run ... fails"): the toolkit's host
    for sentence in prose_sentences(text):
        for match in _UNIT.finditer(sentence):
            unit = ("nvidia-container-toolkit" if match["ctk"] else "nvidia-fabricmanager" if match["fm"]
                    else "nvidia-persistenced" if match["pd"] else "docker")
            state = _unit_state(sentence, match)
            if state is None and _CJK.search(sentence):
                state = _unit_state_zh(sentence, match)
            if state is not None:
                found[unit] = UnitStatement(unit, state[0], state[1], sentence[:300])
            elif match["docker"]:
                engines.add("docker")
        engines.update(m.group(0).lower() for m in _PODMAN.finditer(sentence))
    toolkit = found.get("nvidia-container-toolkit")
    if toolkit is not None and "docker" in found:
        engines.discard("docker")  # the words say docker is not there
    if toolkit is not None:
        found["nvidia-container-toolkit"] = UnitStatement(toolkit.unit, toolkit.active, toolkit.enabled, toolkit.words,
                                                          tuple(sorted(engines)))
    return tuple(found.values())


def _unit_state(sentence: str, match: re.Match[str]) -> tuple[str | None, str | None] | None:
    before = _before(sentence, match.start(), 60)
    if _UNIT_CONDITION.search(before):
        return None
    if _THERE_IS_NO.search(before):
        return _UNIT_STATES["installed"]
    state = _UNIT_STATE.match(sentence[match.end():match.end() + 120])
    if state is None or _PAST_BE.search(state.group(0).lower()):
        return None
    word = state["state"].lower().split()[-1]
    return _UNIT_STATES.get(word) or (_UNIT_STATES["failed"] if word.startswith("crash") else None)


# (matched at the unit's end: no "^", which matches only at the start of the string)
# the state in Chinese: after the unit ("nvidia-fabricmanager 没有安装", "服务起不来", "启动失败", "被禁用了") or,
# for one not installed, before it ("没有安装 nvidia-fabricmanager", "系统里没有 nvidia-persistenced")
_UNIT_STATE_ZH = lazy_re(r"\s{0,2}(?:服务|服務|包|守护进程|守護進程)?\s{0,2}"
                         r"(?:也|还|還|都|一直|根本|好像|似乎){0,2}\s{0,2}"
                         r"(?:(?P<missing>(?:没有?|沒有?|未)被?(?:安装|安裝|装|裝)|不存在|找不到)|"
                         r"(?P<stopped>(?:没有?|沒有?|未)在?(?:运行|運行|启动|啟動|开启|開啟|跑起来|跑起來)|"
                         r"不在(?:运行|運行)|起不来|起不來|停了|停止了)|"
                         r"(?P<failed>(?:启动|啟動|运行|運行)(?:失败|失敗|报错|報錯)|挂了|掛了|崩溃|崩潰)|"
                         r"(?P<disabled>被?禁用))")
_UNIT_MISSING_BEFORE_ZH = lazy_re(r"(?:(?:没有?|沒有?|未)(?:安装|安裝|装|裝)了?|没有|沒有|缺少|没找到|沒找到)\s{0,3}$")
_UNIT_CONDITION_ZH = lazy_re(r"如果|假如|要是|是否|检查|檢查|确认|確認|确保|確保|需要|必须|必須|记得|記得|否则|否則|"
                             r"之前|以前|原来|原來|曾经|曾經")


def _unit_state_zh(sentence: str, match: re.Match[str]) -> tuple[str | None, str | None] | None:
    """What a Chinese sentence says of the unit ``match`` names, as ``_unit_state`` gives it."""
    before = sentence[max(0, match.start() - 30):match.start()]
    if _UNIT_CONDITION_ZH.search(before):
        return None
    if _UNIT_MISSING_BEFORE_ZH.search(before):
        return _UNIT_STATES["installed"]
    state = _UNIT_STATE_ZH.match(sentence, match.end())
    if state is None or _UNIT_CONDITION_ZH.search(sentence[match.end():state.end()]):
        return None
    if state["missing"]:
        return _UNIT_STATES["installed"]
    if state["stopped"]:
        return _UNIT_STATES["running"]
    if state["failed"]:
        return _UNIT_STATES["failed"]
    return _UNIT_STATES["disabled"]


# --------------------------------------------------------------------------- PCIe links


@record
class PcieStatement:
    """The PCIe link a person's words state for a GPU now: generation and width (None: not stated), and the width
    the words say it should have ("x4 instead of x16")."""

    gen: int | None
    width: int | None
    expected_width: int | None
    words: str
    busy_pct: float | None = None  # the GPU's utilisation the same sentence states ("at 100 % utilisation")


# bounded by Latin letters and digits, not \w: Chinese writes "链路是gen3" without a blank
_GEN = lazy_re(r"(?<![a-zA-Z0-9_.])(?:gen\s?(?P<gen>[1-6])|pcie?\s?(?:gen\s?)?(?P<pcie>[1-6])(?:\.0)?|"
               r"(?P<speed>2\.5|5(?:\.0)?|8(?:\.0)?|16(?:\.0)?|32(?:\.0)?|64(?:\.0)?)\s?gt/s)(?!\w|\.\d)", re.I)
_SPEED_GEN = {"2.5": 1, "5": 2, "8": 3, "16": 4, "32": 5, "64": 6}
_WIDTH = lazy_re(r"(?<![a-zA-Z0-9_.])x\s?(?P<width>1|2|4|8|16|32)(?![a-zA-Z0-9_]|\.\d)", re.I)
_EXPECTED = lazy_re(r"\b(?:instead of|rather than|should be|expected|supposed to be|not|of|out of|vs\.?|versus|"
                    r"max(?:imum)?|capable of|supports?|rated|spec(?:ified)?|up to|cap(?:ability)?|lnkcap)"
                    r"\W{0,3}(?:\S+\s+){0,2}$")
# a link that changes ("cycling 32 -> 5 -> 2.5 GT/s", "flapping between Gen1 and Gen4") has no one present state
_CHANGING = lazy_re(r"->|→|=>|\b(?:cycl|flap|toggl|bounc|fluctuat|alternat|oscillat|between)\w{0,6}", re.I)
# "100 % utilisation", "GPU util at 98%", "utilization of 95 %": the GPU's load, in the sentence that states the link
_UTILISATION = lazy_re(r"(?<![\w.])(?P<pct>\d{1,3})\s?%\s(?:gpu[- ]?)?util|"
                       r"\butil(?:i[sz]ation)?\s(?:is\s|of\s|at\s|was\s){0,2}(?P<pct2>\d{1,3})\s?%", re.I)
_LINK_CONTEXT = lazy_re(r"pcie|pci-e|pci express|\blink\b|lnksta|gt/s|\bgen\s?\d|\blanes?\b|链路|鏈路|通道|插槽|槽位",
                        re.I)
# the same as _EXPECTED in Chinese: "本来应该是 x16", "而不是 x16", "最高支持 Gen4 x16", "理论上 x16"
_EXPECTED_ZH = lazy_re(r"(?:应该是|應該是|本来是|本來是|本应|本應|而不是|不是|最高|最大|支持|理论上?|理論上?|额定|額定|"
                       r"规格|規格|满速|滿速|标称|標稱)(?:是|为|為|的|应该是|應該是)?\s{0,3}(?:pcie\s?)?"
                       r"(?:(?:gen\s?)?\d(?:\.0)?\s{0,3})?$")


# a Chinese sentence that supposes a link ("如果链路是 x8") or tells it changing ("时而 x16 时而 x8") states none
_NO_LINK_ZH = lazy_re(r"如果|假如|要是|是否|时而|時而|来回|來回|忽高忽低|跳来跳去|跳來跳去")


def _expected(before: str) -> bool:
    """Whether the words before a value make it a maximum, an expectation or a negation (English or Chinese)."""
    return _EXPECTED.search(before) is not None or _EXPECTED_ZH.search(before) is not None


def pcie_statements(text: str) -> tuple[PcieStatement, ...]:
    """The PCIe links the sentences of ``text`` state as a GPU's present one ("stuck at Gen2 x16", "only
    2.5 GT/s x8", "x4 instead of x16"). A value the words make a maximum, an expectation or a negation
    ("should be x16", "capable of Gen4", "not x16") is no present state; it may be the expected width. A
    sentence naming two present generations or widths states none of them. A utilisation the same sentence states
    comes with it (GH407 judges a generation below the board's only while the GPU is busy)."""
    found: list[PcieStatement] = []
    for sentence in prose_sentences(text):
        if not _LINK_CONTEXT.search(sentence) or _CHANGING.search(sentence) or _NO_LINK_ZH.search(sentence):
            continue
        gens = {_gen_of(m) for m in _GEN.finditer(sentence) if not _expected(_before(sentence, m.start(), 40))}
        widths, expected = set(), set()
        for m in _WIDTH.finditer(sentence):
            (expected if _expected(_before(sentence, m.start(), 40)) else widths).add(int(m["width"]))
        gens.discard(None)
        gen = gens.pop() if len(gens) == 1 else None
        width = widths.pop() if len(widths) == 1 else None
        wanted = max(expected) if expected and width is not None and max(expected) > width else None
        if gen or width:
            busy = {float(m["pct"] or m["pct2"]) for m in _UTILISATION.finditer(sentence)}
            found.append(PcieStatement(gen, width, wanted, sentence[:300],
                                       busy.pop() if len(busy) == 1 and max(busy) <= 100 else None))
    return tuple(found[:64])


def _gen_of(match: re.Match[str]) -> int | None:
    if match["gen"] or match["pcie"]:
        return int(match["gen"] or match["pcie"])
    return _SPEED_GEN.get(match["speed"].removesuffix(".0"))


# --------------------------------------------------------------------------- install-time states


@record
class InstallStatement:
    """An install-time state a sentence states now (what a program's output would show):

    - ``headers`` "missing": no kernel headers for the running kernel (``subject``: the release the words name)
    - ``secure-boot`` "enabled" / "disabled" (``mokutil --sb-state``)
    - ``mok-key`` "not-enrolled": shim does not trust the signing key (``mokutil --test-key``)
    - ``module-signed`` "unsigned": the nvidia module carries no signature (``modinfo -F signer nvidia``)
    - ``lockdown`` "none" / "integrity" / "confidentiality": the kernel's lockdown (/sys/kernel/security/lockdown)
    - ``module`` "loaded" / "not-loaded" (``lsmod``): ``subject`` is the module, ``covers`` the grep-like pattern of
      the names the words speak for ("=nvidia": that name only; "nvidia": every name holding it, ``lsmod | grep``)
    - ``docker-runtime`` "no-nvidia": the running Docker daemon has no nvidia runtime (``docker info``)
    - ``kernel-module`` "built" / "not-built": ``subject`` has the nvidia module or not (``find /lib/modules``,
      ``dkms status``); for "built", ``covers`` is the running kernel the same sentence names (it lacks the module)
    """

    fact: str
    value: str
    words: str
    subject: str = ""
    covers: str = ""


# One family per fact: (fact, value or "" to read it from the group "state", pattern). A pattern names the group
# "subject" where the words name a module or a kernel, "grep" where they name lsmod's filter. Other languages'
# patterns are added to INSTALL_PATTERNS the same way.
# The kernel headers' package names: linux-headers-$(uname -r) (Debian, Ubuntu) and kernel-devel-$(uname -r) (RHEL
# and its rebuilds), as NVIDIA's Driver Installation Guide names them ("Pre-installation Actions", install the kernel
# headers and development packages for the running kernel, https://docs.nvidia.com/datacenter/tesla/
# driver-installation-guide/); "kernel-headers" on RHEL is the userspace one, but people write it for both.
# the release a package name ends in: "6.8.0-45-generic", "$(uname -r)", "`uname -r`"
_RELEASE = r"\$\(uname\s{1,2}-r\)|`uname\s{1,2}-r`|[\w.+~-]{1,60}"
_HEADERS = (r"(?:(?:the|my|our)\s{1,3})?(?:(?:linux[- ])?kernel[- ]headers|linux-headers(?:-(?P<subject>"
            + _RELEASE + r"))?|kernel-devel(?:-(?P<subject2>" + _RELEASE + r"))?|headers|kernel[- ]sources?)")
_HEADERS_MISSING = lazy_re(
    r"(?<![\w/.-])" + _HEADERS + r"(?:\s{1,3}packages?)?(?:\s{1,3}for\s{1,3}(?:the\s{1,3}|my\s{1,3})?"
    r"(?:running|current)\s{1,3}kernel)?\s{1,3}(?:(?:is|are|seems?|appears?)\s{1,3}(?:to\s{1,3}be\s{1,3})?)?(?:still\s{1,3})?"
    r"(?:not\s{1,3}(?:installed|present|found|available)|missing|absent)\b", re.I)
# "no headers installed", "dkms is installed but no headers": not "no headers needed"
_NO_HEADERS = lazy_re(r"\bno\s{1,3}(?:kernel[- ])?(?:headers|linux-headers|kernel-devel)\b"
                      r"(?!\s{1,3}(?:packages?\s{1,3})?(?:(?:is|are)\s{1,3})?(?:needed|required|necessary)\b)", re.I)
_SECURE_BOOT = r"(?:uefi\s{1,3})?secure\s{0,2}boot"
# "on"/"off" only where the phrase ends there: "Secure Boot on my laptop" states nothing
_SB_STATE_AFTER = lazy_re(
    r"\b" + _SECURE_BOOT + r"(?:\s{1,3}(?:mode|state))?\s{1,3}(?:(?:is|seems|appears)\s{1,3})?"
    r"(?:(?:still|currently|also|definitely|actually)\s{1,3})?(?P<state>not\s{1,3}enabled|enabled|active|disabled|turned\s{1,3}(?:on|off)|"
    r"(?:on|off)(?=\s{0,2}(?:$|[,.;!)]|(?:and|but|so|in)\b)))", re.I)
_SB_STATE_BEFORE = lazy_re(r"\b(?P<state>enabled|disabled|turned\s{1,3}(?:on|off)|switched\s{1,3}(?:on|off))\s{1,3}"
                           r"(?:the\s{1,3})?" + _SECURE_BOOT + r"\b", re.I)
# Secure Boot named as what stops the module ("cannot load because of Secure Boot", "Secure Boot blocks the module"):
# only an enforcing Secure Boot refuses a module (the kernel's module signing documentation, "Kernel module signing
# facility", https://docs.kernel.org/admin-guide/module-signing.html; mokutil --sb-state prints "SecureBoot enabled")
_SB_BLAMED = lazy_re(r"\b(?:because\s{1,3}of|due\s{1,3}to|blocked\s{1,3}by|rejected\s{1,3}by|refused\s{1,3}by)\s{1,3}"
                     r"(?:the\s{1,3})?" + _SECURE_BOOT + r"\b|\b" + _SECURE_BOOT + r"\s{1,3}(?:is\s{1,3})?(?:blocks|"
                     r"blocking|prevents|preventing|rejects|rejecting|refuses|refusing)\b", re.I)
_KEY = (r"(?:mok|machine\s{1,3}owner\s{1,3}key|(?:(?:the|my|our|dkms)\s{1,3})?"
        r"(?:mok\s{1,3}|signing\s{1,3}|dkms\s{1,3})?key)")
_KEY_NOT_ENROLLED = lazy_re(
    r"\b" + _KEY + r"\s{1,3}(?:(?:is|has)\s{1,3})?(?:still\s{1,3})?not\s{1,3}(?:been\s{1,3})?(?:yet\s{1,3})?enrolled\b|"
    r"\b(?:never|not|forgot\s{1,3}to)\s{1,3}(?:\w{1,12}\s{1,3})?enroll(?:ed)?\s{1,3}(?:the\s{1,3}|my\s{1,3}|a\s{1,3}|"
    r"any\s{1,3})?(?:mok\b|machine\s{1,3}owner\s{1,3}key|(?:mok\s{1,3}|signing\s{1,3}|dkms\s{1,3})?key)", re.I)
_UNSIGNED = lazy_re(
    r"\b(?:(?:the|my|our)\s{1,3}(?:nvidia\s{1,3})?(?:kernel\s{1,3})?(?:modules?|driver)|nvidia\.ko|nvidia\s{1,3}"
    r"(?:kernel\s{1,3})?modules?)\s{1,3}(?:is|are)\s{1,3}(?:still\s{1,3})?(?:not\s{1,3}signed|unsigned)\b", re.I)
# Kernel lockdown in words (man kernel_lockdown.7; Documentation/admin-guide/kernel-parameters.txt, "lockdown=
# [SECURITY] { integrity | confidentiality }"; /sys/kernel/security/lockdown's levels none, integrity,
# confidentiality): "with kernel lockdown set to integrity", "lockdown mode is enabled", "lockdown=confidentiality in
# our AMI", "the kernel is locked down". A lockdown said to be on without a level is at least "integrity" (the boot
# line "Kernel is locked down from ..." says no more). "Disabled lockdown and it works" (the past fix) states nothing.
_LOCKDOWN_STATE = lazy_re(
    r"\b(?:kernel\s{1,3})?lockdown(?:\s{1,3}(?:mode|level|lsm|setting))?(?:\s{0,2}[=:]\s{0,2}|\s{1,3}(?:(?:is|was)\s{1,3})?"
    r"(?:(?:currently|still|now|also|already)\s{1,3})?(?:(?:set|configured|forced)\s{1,3}(?:to|as)\s{1,3}|in\s{1,3})?)"
    r"[\"'\[]?(?P<state>integrity|confidentiality|none|enabled|active|enforced|enforcing|disabled)\b", re.I)
_LOCKED_DOWN = lazy_re(
    r"\b(?:kernel|system|machine|host|node|os)\s{1,3}(?:is|runs)\s{1,3}(?:(?:currently|still|now|also|already)\s{1,3})?"
    r"(?:locked\s{1,3}down|in\s{1,3}(?:kernel\s{1,3})?lockdown(?:\s{1,3}mode)?)\b(?!\s{1,3}from\b)", re.I)
_MODULE_NAME = r"(?P<subject>nvidia(?:[_-](?:uvm|drm|modeset|peermem))?|nouveau)"
_MODULE_STATE = lazy_re(
    r"(?<![\w/.-])" + _MODULE_NAME + r"(?:\s{1,3}(?:kernel\s{1,3})?(?:module|driver|kmod))?\s{1,3}(?:is|are)\s{1,3}"
    r"(?:(?:still|currently|also|definitely)\s{1,3})?(?P<state>not\s{1,3}loaded|loaded|in\s{1,3}use)\b", re.I)
_LSMOD_NONE = lazy_re(
    r"\blsmod\b(?:\s{0,3}\|\s{0,3}grep\s{1,3}(?:-\w{1,3}\s{1,3})?['\"]?(?P<grep>[\w-]{1,20})['\"]?)?\s{1,3}"
    r"(?:shows|returns|prints|gives|lists|outputs)\s{1,3}(?:nothing|no\s{1,3}output|(?:an\s{1,3})?empty|no\s{1,3}"
    + _MODULE_NAME + r"\b)", re.I)
# Docker's daemon knows the nvidia runtime once `nvidia-ctk runtime configure --runtime=docker` wrote it into
# /etc/docker/daemon.json and the daemon was restarted (NVIDIA Container Toolkit, "Installing the NVIDIA Container
# Toolkit", Configuring Docker, https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/
# install-guide.html): daemon.json edited without the restart leaves the running daemon without it.
_NO_RUNTIME = lazy_re(
    r"\bno\s{1,3}nvidia\s{1,3}runtime\b|\bnvidia\s{1,3}runtime\s{1,3}(?:is\s{1,3})?(?:not\s{1,3}(?:registered|"
    r"configured|listed|shown|there)|missing)\b|\bdocker\s{1,3}(?:daemon\s{1,3})?(?:was|has)\s{1,3}not\s{1,3}(?:been\s{1,3})?"
    r"restarted\b|\bnot\s{1,3}(?:yet\s{1,3})?restart(?:ed)?\s{1,3}(?:the\s{1,3})?docker\b", re.I)
_DOCKER_INFO = lazy_re(r"\bdocker\s{1,3}info\b|daemon\.json|\bdocker\b", re.I)

# A kernel release as people write it: "5.14", "6.8.0-45-generic", "5.14.0-427.el9.x86_64"
_KREL = (r"(?P<kernel>[2-7]\.\d{1,2}(?:\.\d{1,3})?(?:-[\w+~]{1,30}(?:\.[\w+~]{1,30}){0,6}){0,3})"
         r"(?![\w.]{0,2}\d)")
# "the module was built for 5.13 but I boot 5.14": the kernel it has a module for, and the running one (then without)
_BUILT_FOR = lazy_re(
    r"\b(?:module|driver|nvidia(?:\.ko)?|it)\s{1,3}(?:is|was|got|has\s{1,3}been)\s{1,3}(?:only\s{1,3})?(?:built|compiled|"
    r"installed)\s{1,3}(?:only\s{1,3})?for\s{1,3}(?:the\s{1,3}(?:old|older|previous)\s{1,3})?(?:kernel\s{1,3})?"
    + _KREL, re.I)
_RUNNING = lazy_re(
    r"\b(?:i\s{1,3}(?:boot|booted|run|am\s{1,3}(?:running|on|booting))|(?:the\s{1,3})?running\s{1,3}kernel\s{1,3}is|"
    r"uname\s{1,3}-r\s{1,3}(?:shows|says|gives|is)|booted\s{1,3}into|now\s{1,3}(?:on|running))\s{1,3}(?:the\s{1,3})?"
    r"(?:new\s{1,3})?(?:kernel\s{1,3}|linux\s{1,3})?" + _KREL.replace("?P<kernel>", "?P<running>"), re.I)
# "dkms did not build the module for the new kernel 5.14", "there is no nvidia module for kernel 5.14"
_NOT_BUILT = lazy_re(
    r"(?:\bdkms\s{1,3}(?:did\s{1,3}not|failed\s{1,3}to|could\s{1,3}not|does\s{1,3}not)\s{1,3}(?:build|install|compile)"
    r"\s{1,3}(?:the\s{1,3})?(?:nvidia\s{1,3})?(?:module\s{1,3}|driver\s{1,3})?|\bno\s{1,3}nvidia\s{1,3}(?:kernel\s{1,3})?"
    r"module\s{1,3})for\s{1,3}(?:the\s{1,3})?(?:new|newer|latest|current|running)?\s{0,3}(?:kernel\s{1,3})?" + _KREL,
    re.I)

INSTALL_PATTERNS: list[tuple[str, str, re.Pattern[str]]] = [
    ("headers", "missing", _HEADERS_MISSING),
    ("headers", "missing", _NO_HEADERS),
    ("secure-boot", "", _SB_STATE_AFTER),
    ("secure-boot", "", _SB_STATE_BEFORE),
    ("secure-boot", "enabled", _SB_BLAMED),
    ("mok-key", "not-enrolled", _KEY_NOT_ENROLLED),
    ("module-signed", "unsigned", _UNSIGNED),
    ("lockdown", "", _LOCKDOWN_STATE),
    ("lockdown", "integrity", _LOCKED_DOWN),
    ("module", "", _MODULE_STATE),
    ("module", "not-loaded", _LSMOD_NONE),
    ("docker-runtime", "no-nvidia", _NO_RUNTIME),
    ("kernel-module", "built", _BUILT_FOR),
    ("kernel-module", "not-built", _NOT_BUILT),
]
_SB_STATES = {"enabled": "enabled", "active": "enabled", "on": "enabled", "turned on": "enabled",
              "switched on": "enabled", "not enabled": "disabled", "disabled": "disabled", "off": "disabled",
              "turned off": "disabled", "switched off": "disabled"}
_LOCKDOWN_STATES = {"integrity": "integrity", "confidentiality": "confidentiality", "none": "none",
                    "enabled": "integrity", "active": "integrity", "enforced": "integrity", "enforcing": "integrity",
                    "disabled": "none"}
_MODULE_STATES = {"loaded": "loaded", "in use": "loaded", "not loaded": "not-loaded"}
# before the match: a condition, an instruction or a doubt ("if Secure Boot is enabled", "make sure nouveau is not
# loaded", "not sure whether"), or a negation of the action ("I have not disabled Secure Boot")
_INSTALL_CONDITION = lazy_re(r"\b(?:if|when|whether|unless|once|until|make\s+sure|ensure|check|verify|in\s+case|"
                             r"otherwise|need|needs|must|should|wonder|maybe|might|not\s+sure)\b|\b(?:not|never)\s+$")


def install_statements(text: str) -> tuple[InstallStatement, ...]:
    """The install-time states the sentences of ``text`` state now: kernel headers missing, Secure Boot on or off,
    the MOK not enrolled, the nvidia module unsigned, a module loaded or not, Docker without the nvidia runtime. The
    past ("Secure Boot was enabled"), a question, a condition or an instruction ("make sure nouveau is not loaded")
    state nothing. The last statement per fact (and module or kernel) wins."""
    found: dict[tuple[str, str], InstallStatement] = {}
    for sentence in prose_sentences(text):
        for fact, value, pattern in INSTALL_PATTERNS:
            for match in pattern.finditer(sentence):
                stated = _install_stated(sentence, fact, value, match)
                if stated is not None:
                    found[(stated.fact, stated.subject if fact in ("module", "kernel-module") else "")] = stated
    return tuple(found.values())


def _install_stated(sentence: str, fact: str, value: str, match: re.Match[str]) -> InstallStatement | None:
    if _INSTALL_CONDITION.search(_before(sentence, match.start(), 40)):
        return None
    # "docker was not restarted", "the module was built for 5.13": still so
    if fact not in ("docker-runtime", "kernel-module") and _PAST_BE.search(match.group(0).lower()):
        return None
    groups = match.groupdict()
    state = " ".join((groups.get("state") or "").lower().split())
    subject = (groups.get("subject") or groups.get("subject2") or "").lower()
    words = sentence[:300]
    if fact == "secure-boot":
        value = value or _SB_STATES.get(state, "")
        return InstallStatement(fact, value, words) if value else None
    if fact == "lockdown":
        value = value or _LOCKDOWN_STATES.get(state, "")
        return InstallStatement(fact, value, words) if value else None
    if fact == "docker-runtime" and not _DOCKER_INFO.search(sentence):
        return None  # "no nvidia runtime" of another engine (containerd, CRI-O): not Docker's state
    if fact == "kernel-module":
        return _kernel_module(sentence, value, match)
    if fact == "module":
        subject = subject.replace("-", "_") or (groups.get("grep") or "").lower()
        if not subject.startswith(("nvidia", "nouveau")):
            return None  # "lsmod shows nothing" names no module: it states nothing about one
        value = value or _MODULE_STATES[state]
        # "lsmod | grep nvidia" printing nothing speaks for every name holding "nvidia"; words naming a module, for it
        listed = groups.get("grep") or (match.group(0).lower().startswith("lsmod") and subject)
        covers = listed.lower() if value == "not-loaded" and listed else f"={subject}"
        return InstallStatement(fact, value, words, subject, covers)
    return InstallStatement(fact, value, words, subject.strip("`"))


def _kernel_module(sentence: str, value: str, match: re.Match[str]) -> InstallStatement | None:
    """A kernel the words say has the nvidia module ("built") or lacks it ("not-built"). "Built for 5.13 but I boot
    5.14" also says the running 5.14 lacks it: ``covers`` carries that running kernel."""
    kernel = match["kernel"].rstrip(".-")
    running = ""
    if value == "built":
        after = _RUNNING.search(sentence, match.end())
        running = after["running"].rstrip(".-") if after else ""
        if running == kernel:
            return None  # built for the kernel it runs: nothing is missing
    return InstallStatement("kernel-module", value, sentence[:300], kernel, running)


# --------------------------------------------------------------------------- packages


@record
class PackageStatement:
    """A package a sentence says is on the host now (``present``) or was taken off it (not ``present``): "I installed
    cuda-compat-12.9", "I have nvidia-driver-535 installed", "after apt install nvidia-container-toolkit", "I removed
    cuda-compat", "pip installed torch==2.3.0+cu121", "installed the 550.54.15 runfile".

    ``name`` is spelt as the package manager lists it (a release written with dots, cuda-compat-12.9, is the package
    cuda-compat-12-9); "torch" is pip's wheel and "nvidia-runfile" the .run installer (``version`` its driver)."""

    name: str
    present: bool
    words: str
    version: str | None = None
    manager: str = ""  # "pip", "runfile", else "" (dpkg or rpm: the words do not say)


# The package names of the driver's, CUDA's and the container toolkit's packages, as the distributions spell them:
# Ubuntu's and Debian's nvidia-driver-<branch>[-server|-open], nvidia-dkms-<branch>, libnvidia-compute-<branch>,
# nvidia-utils-<branch> (Ubuntu, "NVIDIA drivers installation", https://documentation.ubuntu.com/server/how-to/
# graphics/install-nvidia-drivers/); the CUDA repository's cuda-drivers[-<branch>], cuda-toolkit-<X>-<Y> and
# cuda-compat-<X>-<Y> (https://developer.download.nvidia.com/compute/cuda/repos/, and NVIDIA's CUDA Installation Guide
# for Linux, "Package Manager Installation"); RHEL's and Fedora's kmod-nvidia (ELRepo), akmod-nvidia (RPM Fusion),
# nvidia-driver[-cuda]; the NVIDIA Container Toolkit's nvidia-container-toolkit; pip's torch==<version>+cu<XY>.
_PACKAGE = lazy_re(
    r"(?<![a-zA-Z0-9_/.=-])(?:(?P<deb>nvidia-(?:driver|dkms|utils|compute-utils|kernel-common|kernel-source|headless(?:-no-dkms)?)"
    r"-\d{3}(?:-server)?(?:-open)?|libnvidia-(?:compute|gl|common|decode|encode|extra|cfg1|fbc1)-\d{3}(?:-server)?|"
    r"linux-modules-nvidia-\d{3}(?:-server)?(?:-open)?-[\w.-]{1,40}|cuda-drivers(?:-\d{3})?|"
    r"nvidia-driver(?:-cuda|-libs)?|(?:a)?kmod-nvidia(?:-(?:open|latest)-dkms)?|xorg-x11-drv-nvidia(?:-cuda)?|"
    r"nvidia-container-toolkit|nvidia-docker2)(?:(?:=|\s\(|\s(?:version\s)?)(?P<pver>\d{1,3}\.\d{1,3}(?:\.\d{1,3})?"
    r"(?:-[\w.~+]{1,40})?)\)?)?|"
    r"(?P<cuda>cuda-(?:toolkit|compat|runtime|libraries|cudart))"
    r"(?:-(?P<major>\d{1,2})[-.](?P<minor>\d{1,2}))?|torch==(?P<torch>\d{1,2}\.\d{1,2}(?:\.\d{1,3})?(?:\+(?:cu\d{2,3}|cpu))?)|"
    r"(?:NVIDIA-Linux-(?:x86_64|aarch64)-(?P<run>\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?:-no-compat32)?\.run|"
    r"(?:the\s)?(?P<run2>\d{3}\.\d{1,3}(?:\.\d{1,3})?)\s(?:\.run|run-?file|\.run\sfile)))"
    r"(?![a-zA-Z0-9_+]|[.-][a-zA-Z0-9_])", re.I)
# the verb that says what happened to the package: the last one before its name in the sentence
_PACKAGE_VERB = lazy_re(
    r"\b(?:(?P<present>installed|reinstalled|have(?!\s+to\b)|has(?!\s+to\b)|got|added|using|running)|"
    r"(?P<absent>removed|uninstalled|purged|deleted|erased|got\s+rid\s+of)|"
    r"(?P<change>upgraded|updated|switched|moved|downgraded|changed|went)|"
    r"(?P<command>(?:apt(?:-get)?|aptitude|dnf|yum|zypper|pip3?|conda)\s+(?:-\S{1,20}\s+){0,3}"
    r"(?P<cverb>install|reinstall|remove|purge|autoremove|erase|uninstall))|"
    r"(?P<tried>tried|trying|try|attempted|attempting|wanted|want|planning|plan|going\s+to|need(?:s|ed)?|must|"
    r"should|could|would|might|may|suggest\w{0,4}|recommend\w{0,4}))\b|"
    # Chinese, written against the name ("我安装了cuda-compat-12-9", "卸载了 cuda-compat"): no \b there
    r"(?P<present_zh>安装了|安裝了|装了|裝了|已经?安装|已經?安裝|升级到|升級到|更新到|换成|換成)|"
    r"(?P<absent_zh>卸载了|卸載了|删除了|刪除了|移除了|已经?卸载|已經?卸載)|"
    r"(?P<tried_zh>尝试|嘗試|试着|試著|打算|准备|準備|想要?|需要|应该|應該|要不要|是否|如果|假如|要是)", re.I)
# after the name: "nvidia-driver-535 is installed", "cuda-compat was removed", "nvidia-dkms-535 installed"
_PACKAGE_AFTER = lazy_re(
    r"\s{0,2}(?:(?:package|packages)\s{1,3})?(?:(?:is|are|was|were|got|has\s+been|have\s+been)\s{1,3})?"
    r"(?:(?:still|also|now|already|definitely)\s{1,3})?(?P<state>not\s{1,3}installed|installed|present|removed|"
    r"uninstalled|purged|missing|gone)\b", re.I)
_PACKAGE_NOT = lazy_re(r"\b(?:not|never|no\s+longer|did\s+not|without)\s+(?:\S+\s+){0,1}$|"
                       r"(?:没有?|沒有?|未|不)\s{0,2}$", re.I)
_PACKAGE_PAST = lazy_re(r"\b(?:previously|formerly|used\s+to|originally|earlier|before|had(?!\s+to\b)|old|older)\b"
                        r"|\bfrom\s+(?:\S+\s+)?$", re.I)
_PACKAGE_CONDITION = lazy_re(r"\b(?:if|when|whether|unless|until|in\s+case|otherwise|maybe|wonder|not\s+sure|"
                             r"instead\s+of|rather\s+than|make\s+sure|ensure)\b", re.I)
_COMMAND_LINE = lazy_re(r"^\W{0,3}(?:sudo\s+)?(?:apt|apt-get|aptitude|dnf|yum|zypper|pip3?|conda|rpm|dpkg)\s+"
                        r"(?:-\S{1,20}\s+){0,3}(?:install|reinstall|remove|purge|autoremove|erase|uninstall|-i|-e)\b",
                        re.I)


def package_statements(text: str) -> tuple[PackageStatement, ...]:
    """The packages the sentences of ``text`` say are installed now or were removed, the last statement per package
    winning. A question, a condition, an intention or an attempt ("should I install cuda-compat", "I tried
    installing nvidia-driver-535", "if nvidia-dkms-535 is installed"), a negation ("I did not install cuda-compat")
    and the past ("before, I had nvidia-driver-470", "upgraded from nvidia-driver-470") state nothing. A command line
    alone ("sudo apt install ...") is what was typed, not what it did: nothing. Chinese is read the same way
    ("我安装了 cuda-compat-12-9", "卸载了 cuda-compat"; 打算, 需要, 如果 and 没有 state nothing)."""
    found: dict[str, PackageStatement] = {}
    for sentence in prose_sentences(text):
        if _COMMAND_LINE.match(sentence):
            continue
        for match in _PACKAGE.finditer(sentence):
            stated = _package_stated(sentence, match)
            if stated is not None:
                found.pop(stated.name, None)
                found[stated.name] = stated
    return tuple(found.values())


def _package_name(match: re.Match[str]) -> tuple[str, str | None, str]:
    """(name as the package manager lists it, version, manager)."""
    if match["torch"]:
        return "torch", match["torch"], "pip"
    run = match["run"] or match["run2"]
    if run:
        return "nvidia-runfile", run, "runfile"
    if match["cuda"]:
        name = match["cuda"].lower()
        return (f"{name}-{match['major']}-{match['minor']}" if match["major"] else name), None, ""
    return match["deb"].lower(), match["pver"], ""


def _package_stated(sentence: str, match: re.Match[str]) -> PackageStatement | None:
    """What the words around one package name say happened to it, or None where they state nothing now."""
    name, version, manager = _package_name(match)
    before = sentence[max(0, match.start() - 90):match.start()]
    after = _PACKAGE_AFTER.match(sentence, match.end())
    verbs = list(_PACKAGE_VERB.finditer(before))
    verb = verbs[-1] if verbs else None
    if any(v["tried"] or v["tried_zh"] for v in verbs[-2:]):
        return None  # "I tried to install", "I need to install", "should I have installed"
    if after is not None:
        state = " ".join(after["state"].lower().split())
        if state in ("installed", "present") and _WAS.match(sentence, match.end()):
            return None  # "X was installed" (then): not said to be there now
        present, lead = state in ("installed", "present"), before
    elif verb is not None:
        if _OTHER_OBJECT.search(before[verb.end():]):
            return None  # "removed the environment variable for cuda-compat-12.9": not the package
        present = _verb_present(verb, before[verb.end():])
        lead = before[:verb.start()]
        if _past(verb[0]) and (narrative := _NARRATIVE_WHEN.search(lead)) is not None:
            lead = lead[:narrative.start()]  # "when I installed X": what happened then, not a condition
    else:
        return None
    if present is None or _PACKAGE_CONDITION.search(lead[-60:]) or _PACKAGE_NOT.search(lead) \
            or _PACKAGE_PAST.search(before[-60:]):
        return None
    return PackageStatement(name, present, sentence[:300], version, manager)


_WAS = lazy_re(r"\s{0,2}(?:was|were)\b", re.I)
_TO = lazy_re(r"\bto\s+(?:the\s+)?$")
# "when I installed X, it failed": "when" or "once" before a person and a verb in the past tells what happened then,
# a time, not a condition ("when I install X" and "if I installed X" stay conditions)
_NARRATIVE_WHEN = lazy_re(r"\b(?:when|once|after)\s+(?:i|we|they|he|she)\s+(?:\w+\s+)?$", re.I)
# the verb acts on something else that only belongs to the package: "removed the environment variable for
# cuda-compat-12.9", "deleted the symlink of cuda-toolkit-12-4" say nothing of the package itself
_OTHER_OBJECT = lazy_re(r"\b(?:variables?|vars?|paths?|entr(?:y|ies)|lines?|director(?:y|ies)|folders?|dirs?|"
                        r"(?:sym)?links?|files?|librar(?:y|ies)|libs?|settings?|config(?:uration)?s?|exports?)\s+"
                        r"(?:for|of|from|to|pointing\s+to|that\s+points?\s+to)\s+(?:the\s+)?$", re.I)


def _past(verb: str) -> bool:
    """A verb in the past tense: "installed", "removed", "got rid of"."""
    word = verb.split()[0].lower()
    return word.endswith("ed") or word in ("got", "had", "went")


def _verb_present(verb: re.Match[str], between: str) -> bool | None:
    """True: the verb puts the package there ("installed", "upgraded to"); False: takes it off ("removed", "apt
    purge"); None: says neither ("upgraded" without "to" before the name). A package manager's command inside a
    sentence ("after apt install X") says it was run."""
    if verb["present"] or verb["present_zh"]:
        return True
    if verb["absent"] or verb["absent_zh"]:
        return False
    if verb["change"]:
        return True if _TO.search(between) else None
    if verb["command"]:
        return verb["cverb"].lower() in ("install", "reinstall")
    return None


# --------------------------------------------------------------------------- a compat directory on the library path


@record
class LibraryPathStatement:
    """A CUDA forward-compatibility directory a sentence says is on LD_LIBRARY_PATH now: "I added
    /usr/local/cuda-12.8/compat to my LD_LIBRARY_PATH", "I set LD_LIBRARY_PATH=/usr/local/cuda-12.8/compat:...".
    The cuda-compat-X-Y package installs there (NVIDIA's CUDA Compatibility guide, Forward Compatibility), and the
    guide's own step is to put that directory on LD_LIBRARY_PATH."""

    directories: tuple[str, ...]
    words: str


_LD_PATH_NAMED = lazy_re(r"\bLD_LIBRARY_PATH\b")
# an absolute path holding a cuda-compat directory: /usr/local/cuda-12.8/compat, /usr/local/cuda/compat/lib.real
_COMPAT_PATH = lazy_re(r"(?<![\w/.$-])/(?:[\w.+-]{1,64}/){0,8}(?:cuda-)?compat(?:/[\w.+-]{1,64}){0,2}(?![\w/])")
# what puts it there now; what took it off, or what only tried, says nothing is there
_PATH_ADDED = lazy_re(r"\b(?:added|add|set|put|prepended|prepend|appended|exported|export|configured|included|"
                      r"contains|includes|has|is|points?|pointed)\b", re.I)
_PATH_NOT_NOW = lazy_re(r"\b(?:removed|remove|deleted|unset|took|taken|without|not|never|no\s+longer|tried|trying|"
                        r"try|should|could|would|might|if|whether|unless|before|previously|instead)\b", re.I)


def library_path_statements(text: str) -> tuple[LibraryPathStatement, ...]:
    """The cuda-compat directories the sentences of ``text`` say LD_LIBRARY_PATH holds now. A sentence that takes one
    off, denies it, only tries, asks or sets a condition states nothing (prose_sentences leaves questions out)."""
    found: list[LibraryPathStatement] = []
    if not isinstance(text, str) or "LD_LIBRARY_PATH" not in text or "compat" not in text:
        return ()  # the usual paste: no sentence to read
    for sentence in prose_sentences(text):
        if not _LD_PATH_NAMED.search(sentence) or "compat" not in sentence:
            continue
        paths = tuple(dict.fromkeys(m[0].rstrip(".,:;") for m in _COMPAT_PATH.finditer(sentence)
                                    if "cuda" in m[0].lower()))
        if paths and _PATH_ADDED.search(sentence) and not _PATH_NOT_NOW.search(sentence):
            found.append(LibraryPathStatement(paths, sentence[:300]))
    return tuple(found)
