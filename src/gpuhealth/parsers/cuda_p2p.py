"""The CUDA samples that test GPU peer-to-peer: ``p2pBandwidthLatencyTest`` and ``simpleP2P``.

Both come from NVIDIA/cuda-samples (``Samples/5_Domain_Specific/p2pBandwidthLatencyTest``, before 12.0
``Samples/p2pBandwidthLatencyTest``; ``Samples/0_Introduction/simpleP2P``). Their output, as their
``printf`` calls write it (the same from tag v10.0 to v13.0):

p2pBandwidthLatencyTest::

    [P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
    Device: 0, NVIDIA RTX A6000, pciBusID: 1, pciDeviceID: 0, pciDomainID:0
    Device=0 CAN Access Peer Device=1
    P2P Connectivity Matrix
         D\\D     0     1
         0\t     1     1
    Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)
       D\\D     0      1
         0 672.91  11.55
    Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)
    Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
    P2P=Disabled Latency Matrix (us)
       GPU     0      1
    ...
       CPU     0      1

(``--p2p_read`` adds "(P2P Reads)" matrices; older toolkits printed the enabled title without "(P2P
Writes)"). simpleP2P prints ``> Peer access from <name> (GPU0) -> <name> (GPU1) : Yes`` per pair, then
copies between the first capable pair and checks the data: ``Verification error @ element ...`` lines and
``Test failed!``, or ``Test passed``.

The reader is one pass over the lines with string operations only (no pattern that can backtrack), with
bounds on the lines read, the GPUs per matrix and the lines kept.
"""

from __future__ import annotations

import math

from gpuhealth.model import P2pDevice, P2pPair, P2pTest, ParseError

MAX_LINES = 20_000
MAX_GPUS = 64  # columns of a matrix kept (the sample tests every pair: 64 GPUs print 4096 cells a matrix)
MAX_LINE = 4096  # characters of a line looked at
MAX_KEPT = 12  # verification error lines and summary lines kept

BANDWIDTH_TEST = "p2pBandwidthLatencyTest"
SIMPLE_P2P = "simpleP2P"
TITLE = "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"

# The bandwidth matrices the judgement reads, by their title's start: (direction, P2P enabled)
_MATRICES = {
    "Unidirectional P2P=Disabled Bandwidth": ("uni", False),
    "Unidirectional P2P=Enabled Bandwidth": ("uni", True),
    "Bidirectional P2P=Disabled Bandwidth": ("bi", False),
    "Bidirectional P2P=Enabled Bandwidth": ("bi", True),
}


# Lines of the samples' own that hold no value: the notes p2pBandwidthLatencyTest prints, simpleP2P's progress lines
_SAMPLE_LINES = ("***NOTE: In case a device doesn't have P2P access", "So you can see lesser Bandwidth",
                 "NOTE: The CUDA Samples are not meant for performance measurements", TITLE,
                 "Checking for multiple GPUs",
                 "CUDA-capable device count:", "Allocating buffers", "Creating event handles", "Preparing host buffer",
                 "Run kernel on GPU", "Copy data back to host", "Disabling peer access", "Shutting down",
                 "Two or more GPUs with Peer-to-Peer access capability are required")


def sample_line(line: str) -> bool:
    """Whether ``line`` is one the samples print themselves (a note, a progress line), not a person's sentence."""
    text = line.strip()
    return text.startswith(_SAMPLE_LINES) or (text.startswith("[") and text.endswith("] - Starting..."))


def printed_line(line: str) -> bool:
    """Whether ``line`` is one the samples print (a peer-access line, a note, a progress line): their parsers read it,
    though the connectivity matrix may say the same."""
    return _can_access(line.strip()) is not None or sample_line(line)


def parse_p2p_test(text: str) -> P2pTest:
    """Parse the output of p2pBandwidthLatencyTest or simpleP2P (whichever it is)."""
    if "> Peer access from " in text[:65536] or "support of peer to peer memory access" in text[:65536]:
        return parse_simple_p2p(text)
    return parse_p2p_bandwidth(text)


def _lines(text: str) -> list[str]:
    return [line[:MAX_LINE].strip().strip("`") for line in text.splitlines()[:MAX_LINES]]


def _int(token: str) -> int | None:
    token = token.strip()
    return int(token) if token.isdecimal() and len(token) <= 6 else None


def _float(token: str) -> float | None:
    if len(token) > 24:
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _device(line: str) -> P2pDevice | None:
    """``Device: 0, NVIDIA RTX A6000, pciBusID: 1, pciDeviceID: 0, pciDomainID:0`` (the ids in hex)."""
    rest = line[len("Device: "):]
    number, _, rest = rest.partition(", ")
    name, found, ids = rest.rpartition(", pciBusID: ")
    index = _int(number)
    if index is None or not found:
        return None
    values: dict[str, int | None] = {}
    for part in ("pciBusID: " + ids).split(","):
        key, _, value = part.partition(":")
        try:
            values[key.strip()] = int(value.strip(), 16) if len(value.strip()) <= 8 else None
        except ValueError:
            values[key.strip()] = None
    return P2pDevice(index, name.strip(), values.get("pciBusID"), values.get("pciDeviceID"), values.get("pciDomainID"))


def _can_access(line: str) -> tuple[int, int, bool] | None:
    """``Device=0 CAN Access Peer Device=1`` / ``Device=1 CANNOT Access Peer Device=0``."""
    tokens = line.split()
    if len(tokens) != 5 or tokens[2:4] != ["Access", "Peer"] or tokens[1] not in ("CAN", "CANNOT"):
        return None
    src = _int(tokens[0].removeprefix("Device="))
    dst = _int(tokens[4].removeprefix("Device="))
    if src is None or dst is None:
        return None
    return src, dst, tokens[1] == "CAN"


class _Pairs:
    """The pairs' values as the matrices fill them in."""

    def __init__(self) -> None:
        self.values: dict[tuple[int, int], dict[str, object]] = {}

    def set(self, src: int, dst: int, key: str, value: object) -> None:
        if src != dst and src < MAX_GPUS and dst < MAX_GPUS:
            self.values.setdefault((src, dst), {})[key] = value

    def pairs(self) -> tuple[P2pPair, ...]:
        return tuple(P2pPair(src, dst, **fields) for (src, dst), fields in sorted(self.values.items()))  # type: ignore[arg-type]


def _matrix_header(line: str) -> list[int] | None:
    """The column numbers of a matrix's header (``D\\D 0 1``, ``GPU 0 1``, ``CPU 0 1``)."""
    tokens = line.split()
    if not tokens or tokens[0] not in ("D\\D", "GPU", "CPU"):
        return None
    columns = [_int(t) for t in tokens[1:MAX_GPUS + 1]]
    return None if not columns or None in columns else columns  # type: ignore[return-value]


def parse_p2p_bandwidth(text: str) -> P2pTest:
    """Parse p2pBandwidthLatencyTest's output: the devices, peer access per pair, the bandwidth matrices."""
    devices: list[P2pDevice] = []
    pairs = _Pairs()
    shown: list[str] = []
    section: str | None = None  # "access", "uni-False", ... or "other" (latency: not kept)
    columns: list[int] | None = None
    for line in _lines(text):
        if not line:
            continue
        if line.startswith("Device: "):
            device = _device(line)
            if device is not None and len(devices) < MAX_GPUS:
                devices.append(device)
                if len(shown) < MAX_KEPT:
                    shown.append(line)
            continue
        if line.startswith("Device="):
            found = _can_access(line)
            if found is not None:
                pairs.set(found[0], found[1], "access", found[2])
            continue
        title = _section(line)
        if title is not None:
            section, columns = title, None
            if title != "other" and len(shown) < MAX_KEPT:
                shown.append(line)
            continue
        if section is None:
            continue
        header = _matrix_header(line)
        if header is not None:
            columns = header if section != "other" else None
            continue
        if columns is None:
            continue
        tokens = line.split()
        row = _int(tokens[0])
        if row is None:
            section, columns = None, None  # the matrix ended (the closing NOTE, or anything else)
            continue
        cells = tokens[1:len(columns) + 1]
        if section == "access":
            for column, cell in zip(columns, cells, strict=False):
                if cell in ("0", "1"):
                    pairs.set(row, column, "access", cell == "1")
        else:
            for column, cell in zip(columns, cells, strict=False):
                value = _float(cell)
                if value is not None:
                    pairs.set(row, column, section, value)
    found = pairs.pairs()
    if not devices and not found:
        raise ParseError("no device list, peer access or P2P bandwidth matrix: not p2pBandwidthLatencyTest output")
    return P2pTest(BANDWIDTH_TEST, tuple(devices), found, lines=tuple(shown))


def _section(line: str) -> str | None:
    """The section a title line opens: "access", a bandwidth field ("uni_enabled" ...), "other", or None."""
    if line == "P2P Connectivity Matrix":
        return "access"
    if not line.endswith("Matrix (GB/s)") and not line.endswith("Matrix (us)"):
        return None
    for start, (direction, enabled) in _MATRICES.items():
        if line.startswith(start):
            if "(P2P Reads)" in line:
                return "other"  # --p2p_read's extra matrix: the writes' one is judged, as on every run
            return f"{direction}_{'enabled' if enabled else 'disabled'}"
    return "other"  # a latency matrix


def _peer_access(line: str) -> tuple[int, int, bool] | None:
    """``> Peer access from NVIDIA A100 (GPU0) -> NVIDIA A100 (GPU1) : Yes``."""
    rest, found, answer = line[len("> Peer access from "):].rpartition(" : ")
    if not found or answer.strip() not in ("Yes", "No"):
        return None
    source, arrow, target = rest.partition(") -> ")
    if not arrow:
        return None
    src = _int(source[source.rfind("(GPU") + 4:]) if "(GPU" in source else None
    dst = _int(target[target.rfind("(GPU") + 4:].rstrip(")")) if "(GPU" in target else None
    if src is None or dst is None:
        return None
    return src, dst, answer.strip() == "Yes"


def parse_simple_p2p(text: str) -> P2pTest:
    """Parse simpleP2P's output: peer access per pair, the data check's errors and the result."""
    pairs = _Pairs()
    errors: list[str] = []
    shown: list[str] = []
    result: str | None = None
    for line in _lines(text):
        if line.startswith("> Peer access from "):
            found = _peer_access(line)
            if found is not None:
                pairs.set(found[0], found[1], "access", found[2])
        elif line.startswith("Verification error @ element"):
            if len(errors) < MAX_KEPT:
                errors.append(line)
        elif line == "Test failed!":
            result = "failed"
        elif line == "Test passed":
            result = "passed"
        elif line.startswith(("Peer to Peer access is not available", "Waiving test")):
            result = result or "waived"
        elif line.startswith(("Enabling peer access between", "cudaMemcpyPeer / cudaMemcpy between")):
            if len(shown) < MAX_KEPT:
                shown.append(line)
    found = pairs.pairs()
    if not found and result is None:
        raise ParseError("no peer access line and no result: not simpleP2P output")
    return P2pTest(SIMPLE_P2P, (), found, tuple(errors), result, tuple(shown))
