"""Text in the encoding a paste arrives in, turned into UTF-8 with LF line ends before any parser sees it.

Windows tools save UTF-16: PowerShell's ``>`` writes UTF-16-LE with a byte-order mark, some tools leave the
mark out; a few editors write UTF-32 or UTF-8 with a mark. Old Mac tools and some serial-console captures
end lines with a lone CR. The kernel-log scanner splits on LF and every parser reads UTF-8: unconverted, a
UTF-16 paste is "not recognised" and a CR-only log is one line whose Xids merge into one.

``sniff`` looks at an input's first bytes (from its very start: the mark and the NUL pattern depend on the
alignment) and says which conversion it needs, if any. ``Transcoder`` converts a stream as it is read, a
chunk at a time (memory stays bounded whatever the size), ``convert`` a buffer already in memory. Plain
UTF-8 with LF or CRLF line ends needs none: it is left alone, and the scanner reads such a file in place.
"""

from __future__ import annotations

import codecs
from typing import Any, NamedTuple

# Longest first where one mark starts another: UTF-32-LE's FF FE 00 00 begins with UTF-16-LE's FF FE.
_MARKS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
          (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
SNIFF_BYTES = 64 * 1024  # what ``sniff`` is given: enough to see a line end in a log of long lines
_NUL_UNITS = 1024  # 4-byte units looked at for the NUL pattern of text without a mark
_NUL_SHARE = 0.7  # of the units that are not all NUL (padding), this many must fit one encoding's pattern
_CHUNK = 1024 * 1024


class Conversion(NamedTuple):
    codec: str  # "utf-8" (kept as bytes), or a codec to decode with: "utf-16", "utf-16-le", "utf-8-sig"...
    cr_line_ends: bool  # lone CRs end lines: each becomes LF (CRLF becomes LF too)


def sniff(head: bytes) -> Conversion | None:
    """The conversion an input that starts with ``head`` needs; None for UTF-8 (no mark) with LF/CRLF line ends."""
    codec = _marked(head) or _unmarked(head)
    sample = head if codec is None else codecs.decode(head, codec, "replace").encode("utf-8", "replace")
    cr_line_ends = _lone_cr(sample)
    if codec is None and not cr_line_ends:
        return None
    return Conversion(codec or "utf-8", cr_line_ends)


def convert(data: bytes, conversion: Conversion) -> bytes:
    """A whole buffer converted (for text already in memory)."""
    if conversion.codec != "utf-8":
        data = codecs.decode(data, conversion.codec, "replace").encode("utf-8", "replace")
    return _lf(data) if conversion.cr_line_ends else data


class Transcoder:
    """A byte stream read through a ``Conversion``: UTF-8 with LF line ends comes out, a chunk at a time.

    ``head``: bytes already read from the start of ``stream``, converted first. Errors of the stream (a
    limit's ``InputError``) pass through. Offers ``read(size)`` and ``readinto(view)``, what the evidence
    reader and the kernel-log scanners use.
    """

    def __init__(self, stream: Any, conversion: Conversion, head: bytes = b"") -> None:
        self._stream = stream
        self._decoder = (None if conversion.codec == "utf-8"
                         else codecs.getincrementaldecoder(conversion.codec)("replace"))
        self._cr = conversion.cr_line_ends
        self._head = head
        self._out = bytearray()
        self._carry = b""  # a CR at the end of a chunk: LF may start the next one
        self._eof = False

    def _more(self) -> None:
        if self._head:
            raw, self._head = self._head, b""
        else:
            raw = self._stream.read(_CHUNK) or b""
        final = not raw
        data = raw if self._decoder is None else self._decoder.decode(raw, final).encode("utf-8", "replace")
        if self._cr:
            data = self._carry + data
            self._carry = b""
            if data.endswith(b"\r") and not final:
                data, self._carry = data[:-1], b"\r"
            data = _lf(data)
        self._out += data
        self._eof = final

    def read(self, size: int = -1) -> bytes:
        want = _CHUNK if size < 0 else size
        while len(self._out) < want and not self._eof:
            self._more()
        data = bytes(self._out[:want])
        del self._out[:want]
        return data

    def readinto(self, view: Any) -> int:
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)


def _lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _marked(head: bytes) -> str | None:
    for mark, codec in _MARKS:
        if head.startswith(mark):
            return codec
    return None


def _unmarked(head: bytes) -> str | None:
    """UTF-16 or UTF-32 without a mark, told by where its NUL bytes fall: ASCII text in UTF-16-LE is every
    character followed by one NUL (``N\\0V\\0``), in UTF-32-LE by three. UTF-8 text has no NUL at all. Units
    that are all NUL (padding in a pstore or journal export) are left out of the count."""
    sample = head[:_NUL_UNITS * 4]
    if b"\x00" not in sample:
        return None
    units = [u for u in (sample[i:i + 4] for i in range(0, len(sample) - 3, 4)) if u != b"\x00\x00\x00\x00"]
    if len(units) < 8:
        return None
    patterns = (("utf-32-le", lambda u: u[0] != 0 and u[1:] == b"\x00\x00\x00"),
                ("utf-32-be", lambda u: u[3] != 0 and u[:3] == b"\x00\x00\x00"),
                ("utf-16-le", lambda u: u[1] == 0 and u[3] == 0 and (u[0] != 0 or u[2] != 0)),
                ("utf-16-be", lambda u: u[0] == 0 and u[2] == 0 and (u[1] != 0 or u[3] != 0)))
    for codec, fits in patterns:
        if sum(1 for u in units if fits(u)) >= _NUL_SHARE * len(units):
            return codec
    return None


def _lone_cr(sample: bytes) -> bool:
    """A CR that is not followed by LF (a CR as the sample's last byte may be the first half of a CRLF)."""
    crs = sample.count(b"\r")
    return crs > 0 and crs - sample.count(b"\r\n") - sample.endswith(b"\r") > 0
