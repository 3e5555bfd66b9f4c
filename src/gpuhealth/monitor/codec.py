"""Compact columns for history blocks (schema version 2): integer columns, bit-packed, then zlib.

A block is a small table: ``n`` rows and named columns of integers (None = not read). Each column is
stored the cheapest of three ways, chosen per column and block:

- ``raw``: frame of reference, every value minus the column's minimum in the fewest bits that hold the
  range (a column that never changes costs no bits at all, only its name);
- ``delta``: the first value, then the differences, framed the same way (timestamps, energy counters);
- ``dict``: the distinct values once, then each value's index (a clock that takes two values costs
  one bit per sample).

Missing values are a bitmap of the rows that have one, only when some are missing. The packed table is
then compressed with zlib at level 9, which still finds runs and skew that bit-packing leaves.

Layout (after zlib): version byte, varint rows, varint columns; per column: name (varint length,
ASCII), presence flag (0 all, 1 bitmap follows), mode byte, mode parameters as zigzag varints, bit
width byte, then the packed bits (least significant first).
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Sequence

VERSION = 1
_RAW, _DELTA, _DICT = 0, 1, 2
_LEVEL = 9
_DICT_MAX = 16  # more distinct values than this: a dictionary rarely pays for itself

Column = Sequence[int | None]


class CodecError(ValueError):
    """A block that is not in this format (damaged, or from a newer gpuhealth)."""


# ---- varints and bits


def _varint(out: bytearray, value: int) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _zigzag(out: bytearray, value: int) -> None:
    _varint(out, value * 2 if value >= 0 else -value * 2 - 1)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise CodecError("block ends early")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def zigzag(self) -> int:
        value = self.varint()
        return value >> 1 if not value & 1 else -(value >> 1) - 1

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise CodecError("block ends early")
        self.pos += size
        return self.data[self.pos - size:self.pos]


def _pack(values: Sequence[int], width: int) -> bytes:
    if width == 0 or not values:
        return b""
    acc = 0
    for value in reversed(values):
        acc = (acc << width) | value
    return acc.to_bytes((len(values) * width + 7) // 8, "little")


def _unpack(data: bytes, count: int, width: int) -> list[int]:
    if width == 0:
        return [0] * count
    acc, mask = int.from_bytes(data, "little"), (1 << width) - 1
    out = []
    for _ in range(count):
        out.append(acc & mask)
        acc >>= width
    return out


# ---- columns


def _encode_values(out: bytearray, values: list[int]) -> None:
    """Mode, parameters, width and packed bits of ``values`` (no None), the cheapest way."""
    low, high = min(values), max(values)
    choices: list[tuple[int, int, list[int], bytearray]] = []  # (bits, mode, packed values, params)
    params = bytearray()
    _zigzag(params, low)
    choices.append(((high - low).bit_length() * len(values), _RAW, [v - low for v in values], params))
    if len(values) > 1:
        diffs = [b - a for a, b in zip(values, values[1:], strict=False)]
        dlow = min(diffs)
        params = bytearray()
        _zigzag(params, values[0])
        _zigzag(params, dlow)
        width = (max(diffs) - dlow).bit_length()
        choices.append((width * len(diffs) + 8 * len(params), _DELTA, [d - dlow for d in diffs], params))
    distinct = sorted(set(values))
    if 1 < len(distinct) <= _DICT_MAX:
        params = bytearray()
        _varint(params, len(distinct))
        for value in distinct:
            _zigzag(params, value)
        index = {value: i for i, value in enumerate(distinct)}
        width = (len(distinct) - 1).bit_length()
        choices.append((width * len(values) + 8 * len(params), _DICT, [index[v] for v in values], params))
    _, mode, packed, params = min(choices, key=lambda choice: choice[0])
    width = max(packed).bit_length() if packed else 0
    out.append(mode)
    out += params
    out.append(width)
    out += _pack(packed, width)


def _decode_values(reader: _Reader, count: int, skip: bool = False) -> list[int]:
    """The column's values; with ``skip`` only move past them (a column the caller does not need)."""
    mode = reader.byte()
    if mode not in (_RAW, _DELTA, _DICT):
        raise CodecError(f"unknown column mode {mode}")
    if mode == _RAW:
        low = reader.zigzag()
    elif mode == _DELTA:
        first, low = reader.zigzag(), reader.zigzag()
    else:
        distinct = [reader.zigzag() for _ in range(reader.varint())]
    width = reader.byte()
    stored = count - 1 if mode == _DELTA else count
    packed = reader.take((stored * width + 7) // 8)
    if skip:
        return []
    values = _unpack(packed, stored, width)
    if mode == _RAW:
        return [low + v for v in values]
    if mode == _DELTA:
        out = [first]
        for d in values:
            out.append(out[-1] + low + d)
        return out
    try:
        return [distinct[i] for i in values]
    except IndexError as exc:
        raise CodecError("dictionary index out of range") from exc


def encode(rows: int, columns: dict[str, Column]) -> bytes:
    """``columns`` of ``rows`` integers each (None where not read) -> a compressed block."""
    out = bytearray([VERSION])
    _varint(out, rows)
    _varint(out, len(columns))
    for name, column in columns.items():
        if len(column) != rows:
            raise ValueError(f"column {name} has {len(column)} values, not {rows}")
        raw = name.encode("ascii")
        _varint(out, len(raw))
        out += raw
        present = [v for v in column if v is not None]
        if len(present) == rows:
            out.append(0)
        else:
            out.append(1)
            out += _pack([v is not None for v in column], 1) if rows else b""
        if present:
            _encode_values(out, present)
    return zlib.compress(bytes(out), _LEVEL)


def decode(blob: bytes, names: Collection[str] | None = None) -> tuple[int, dict[str, list[int | None]]]:
    """The inverse of ``encode``: (rows, columns), only those in ``names`` when given (the others are
    skipped without unpacking). CodecError when the blob is not such a block."""
    try:
        reader = _Reader(zlib.decompress(blob))
    except zlib.error as exc:
        raise CodecError(f"not a history block: {exc}") from exc
    version = reader.byte()
    if version != VERSION:
        raise CodecError(f"history block format {version}; this gpuhealth reads {VERSION}")
    rows, count = reader.varint(), reader.varint()
    columns: dict[str, list[int | None]] = {}
    for _ in range(count):
        name = reader.take(reader.varint()).decode("ascii")
        wanted = names is None or name in names
        if reader.byte() == 0:
            mask, known = None, rows
        else:
            bitmap = reader.take((rows + 7) // 8)
            mask = [bool(bit) for bit in _unpack(bitmap, rows, 1)] if wanted else None
            known = sum(bin(byte).count("1") for byte in bitmap)
        values = _decode_values(reader, known, skip=not wanted) if known else []
        if not wanted:
            continue
        if mask is None:
            columns[name] = list(values)
        else:
            it = iter(values)
            columns[name] = [next(it) if here else None for here in mask]
    return rows, columns
