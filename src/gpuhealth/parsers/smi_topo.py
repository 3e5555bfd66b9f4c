"""``nvidia-smi topo -m`` (how each pair of devices connects) and ``topo -p2p <cap>``.

Both print a matrix: a header row of device names, then one row per device. ``topo -m`` adds
affinity columns after the matrix (``CPU Affinity``, ``NUMA Affinity``, since 590 ``GPU NUMA ID``)
and a legend below it. Real output separates cells with tabs, copies pasted into documents with
spaces, so cells are split on any whitespace: matrix cells and affinity values never contain any.
"""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError, Topology, TopologyLink
from gpuhealth.parsers._values import clean

_ANSI = lazy_re(r"\x1b\[[0-9;]*[A-Za-z]")  # 590+ underlines the header row, even into a file
_DEVICE = lazy_re(r"[A-Za-z][\w-]*\d")  # GPU0, NIC1, mlx5_0 (older drivers named NICs so)
_TOKEN = lazy_re(r"\S+")
_LABEL_SPLIT = lazy_re(r"\t|\s{2,}")  # labels such as "CPU Affinity" hold single spaces


def parse_smi_topo(text: str) -> Topology:
    """Parse ``nvidia-smi topo -m``: devices, every off-diagonal cell, CPU and NUMA affinity."""
    devices, labels, rows = _matrix(text)
    if "CPU Affinity" not in labels:
        raise ParseError("no 'CPU Affinity' column: not nvidia-smi topo -m output")
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    for device, _cells, extra in rows:
        values = dict(zip(labels, extra, strict=False))  # NIC rows print no affinity at all
        for target, label in ((cpu, "CPU Affinity"), (numa, "NUMA Affinity")):
            value = clean(values.get(label))
            if value is not None:
                target[device] = value
    return Topology(devices=devices, links=_links(devices, rows), cpu_affinity=cpu, numa_affinity=numa)


def parse_smi_topo_p2p(text: str) -> Topology:
    """Parse ``nvidia-smi topo -p2p <r|w|n|a|p>``: cells are OK, CNS, GNS, TNS, NS or U."""
    devices, _labels, rows = _matrix(text)
    return Topology(devices=devices, links=_links(devices, rows))


def _links(devices: tuple[str, ...], rows: list) -> tuple[TopologyLink, ...]:
    return tuple(
        TopologyLink(a, b, kind)
        for a, cells, _extra in rows
        for b, kind in zip(devices, cells, strict=True)
        if a != b  # the diagonal is "X"
    )


def _matrix(text: str) -> tuple[tuple[str, ...], list[str], list[tuple[str, list[str], list[str]]]]:
    """The header's device names and trailing column labels, and each row split into cells."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise ParseError("empty topology output")
    devices, labels = _header(lines[0])
    rows = []
    for line in lines[1:]:
        tokens = line.split()
        if tokens[0] not in devices:
            break  # the legend, or anything else after the matrix
        if len(tokens) < len(devices) + 1:
            raise ParseError(f"topology row {tokens[0]} has fewer cells than the {len(devices)} columns")
        cells = tokens[1 : len(devices) + 1]
        rows.append((tokens[0], cells, tokens[len(devices) + 1 :]))
    if not rows:
        raise ParseError("topology matrix has no rows")
    return devices, labels, rows


def _header(line: str) -> tuple[tuple[str, ...], list[str]]:
    """Leading device names, then the labels of the columns after the matrix."""
    devices: list[str] = []
    end = 0
    for token in _TOKEN.finditer(line):
        if not _DEVICE.fullmatch(token[0]):
            break
        devices.append(token[0])
        end = token.end()
    if not devices or len(set(devices)) != len(devices):
        raise ParseError("first line is not a topology header of device names (GPU0 GPU1 ...)")
    labels = [label.strip() for label in _LABEL_SPLIT.split(line[end:]) if label.strip()]
    return tuple(devices), labels
