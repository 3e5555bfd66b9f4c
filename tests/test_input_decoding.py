"""Any text in (issue 24 item 8, issue 25 item 12): a paste in UTF-16 or UTF-32 (with or without a byte-order mark),
UTF-8 with a mark, or with CR-only line ends is diagnosed exactly like its UTF-8 twin with LF line ends.

The twin is a real kernel log (gpud's dmesg capture, tests/data/corpus/gpud) with Xid 48, 63 and 94 lines.
Before, PowerShell's ``>`` (UTF-16-LE with a mark) gave NO DIAGNOSIS and a CR-only log merged its lines, so
all but one Xid was lost.
"""

from __future__ import annotations

import gzip
import io
import json
import random

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from fuzzing import FUZZ, mutated
from gpuhealth.cli import main
from gpuhealth.decoding import SNIFF_BYTES, Conversion, Transcoder, convert, sniff
from gpuhealth.evidence_input import STREAM_FROM_BYTES
from gpuhealth.parsers import kernel_log
from gpuhealth.parsers.kernel_log import parse_kernel_log, parse_kernel_log_file, parse_kernel_log_stream

LOG = (CORPUS / "gpud/query_log_tail__dmesg.0.log").read_text()

ENCODINGS = {
    "utf-16 with mark (PowerShell >)": lambda text: b"\xff\xfe" + text.encode("utf-16-le"),
    "utf-16-le without mark": lambda text: text.encode("utf-16-le"),
    "utf-16-be without mark": lambda text: text.encode("utf-16-be"),
    "utf-16-be with mark": lambda text: b"\xfe\xff" + text.encode("utf-16-be"),
    "utf-32 with mark": lambda text: text.encode("utf-32"),
    "utf-8 with mark": lambda text: b"\xef\xbb\xbf" + text.encode(),
    "utf-16 with mark, CRLF": lambda text: text.replace("\n", "\r\n").encode("utf-16"),
    "cr-only line ends": lambda text: text.replace("\n", "\r").encode(),
    "utf-16 with mark, cr-only": lambda text: text.replace("\n", "\r").encode("utf-16"),
}


def diagnosis(*args: str, stdin: bytes | None = None) -> tuple[int, str, list[tuple]]:
    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"], input=stdin)
    assert result.exit_code != 3, result.output
    report = json.loads(result.stdout)
    findings = [(f["code"], f["severity"], f["message"], json.dumps(f.get("subject"), sort_keys=True))
                for f in report["findings"]]
    return result.exit_code, report["verdict"], sorted(findings)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    path = tmp_path_factory.mktemp("twin") / "dmesg.log"
    path.write_text(LOG)
    code, verdict, findings = diagnosis(str(path))
    assert (code, verdict) == (2, "BROKEN")
    assert {"Xid 48", "Xid 63", "Xid 94"} <= {f[2][:6] for f in findings}
    return code, verdict, findings


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_paste_in_another_encoding_is_diagnosed_like_its_utf8_twin(encoding, twin, tmp_path):
    data = ENCODINGS[encoding](LOG)
    path = tmp_path / "dmesg.log"
    path.write_bytes(data)
    assert diagnosis(str(path)) == twin
    assert diagnosis("-", stdin=data) == twin  # standard input: a pipe, read once


def test_a_cr_only_log_yields_each_xid_line():
    data = LOG.replace("\n", "\r").encode()
    expected = parse_kernel_log(LOG)
    log = parse_kernel_log(data)
    assert [e.line for e in log.events] == [e.line for e in expected.events]
    assert sum(1 for e in log.events if "Xid" in e.line) == LOG.count("NVRM: Xid") > 1


def test_large_converted_inputs_are_streamed_and_still_diagnosed(tmp_path, twin):
    """Past the in-memory size a converted log goes through the stream scanner (never read whole): a UTF-16
    file, a gzipped one, and a bundle's dmesg read by the file scanner's path."""
    filler = "".join(f"[{i}.000000] eth0: link up\n" for i in range(STREAM_FROM_BYTES // 25))
    text = filler + LOG
    utf8 = tmp_path / "big-utf8.log"
    utf8.write_text(text)
    big_twin = diagnosis(str(utf8))
    assert big_twin[:2] == twin[:2]
    utf16 = tmp_path / "big-utf16.log"
    utf16.write_bytes(text.encode("utf-16"))
    assert utf16.stat().st_size > 2 * STREAM_FROM_BYTES
    assert diagnosis(str(utf16)) == big_twin
    gzipped = tmp_path / "big-utf16.log.gz"
    gzipped.write_bytes(gzip.compress(text.encode("utf-16"), compresslevel=1))
    assert diagnosis(str(gzipped)) == big_twin


def test_the_file_scanner_converts_in_memory_or_as_a_stream(tmp_path, monkeypatch):
    expected = parse_kernel_log(LOG)
    path = tmp_path / "dmesg-utf16.txt"
    path.write_bytes(LOG.replace("\n", "\r").encode("utf-16"))
    assert parse_kernel_log_file(path).events == expected.events  # small: converted in memory
    monkeypatch.setattr(kernel_log, "_CONVERT_IN_MEMORY_BYTES", 1024)
    assert parse_kernel_log_file(path).events == expected.events  # large: streamed through the Transcoder
    stream = parse_kernel_log_stream(io.BytesIO(LOG.encode("utf-16-le")), "pipe")
    assert stream.events == expected.events


class Trickle(io.RawIOBase):
    """A stream that hands out a few bytes a read: CRLF, a UTF-16 unit and a surrogate pair split anywhere."""

    def __init__(self, data: bytes, seed: int) -> None:
        self.data, self.pos, self.rnd = data, 0, random.Random(seed)

    def read(self, size: int = -1) -> bytes:
        n = self.rnd.randint(1, 5)
        piece = self.data[self.pos:self.pos + n]
        self.pos += len(piece)
        return piece


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-32", "utf-8"])
def test_the_transcoder_reads_pieces_split_anywhere_like_the_whole(codec, seed):
    text = "a\r\nb\rc\n\r\rd 😀 é\r" * 40
    data = text.encode(codec)
    conversion = Conversion(codec, True)
    reader = Transcoder(Trickle(data, seed), conversion)
    out = bytearray()
    while piece := reader.read(7):
        out += piece
    assert bytes(out) == convert(data, conversion) == text.replace("\r\n", "\n").replace("\r", "\n").encode()


def test_plain_utf8_needs_no_conversion():
    assert sniff(LOG.encode()) is None
    assert sniff(LOG.replace("\n", "\r\n").encode()) is None  # CRLF: the parsers strip the CR already
    padded = b"\x00" * 8192 + LOG.encode() + b"\x00" * 100  # pstore and journal exports pad with NUL
    assert sniff(padded) is None
    assert sniff(b"[  1.0] NVRM: \x00\x00 NUL bytes inside a line\n" * 50) is None
    assert sniff(LOG.encode("utf-16-le")) == Conversion("utf-16-le", False)
    assert sniff(LOG.replace("\n", "\r").encode()) == Conversion("utf-8", True)


@pytest.mark.parametrize("path", corpus_files("gpud/*dmesg*", "gpud/kmsg__*", "gpud/pstore__*", "issue-logs/*.log"),
                         ids=corpus_id)
def test_the_corpus_logs_keep_the_fast_path(path):
    """Real logs are UTF-8 with LF: none is converted, so the file scanner still reads them in place."""
    assert sniff(path.read_bytes()[:65536]) is None


def _sniffed_and_converted(data: bytes) -> None:
    """``sniff`` and ``convert`` take any bytes: a conversion or None, and a decoded input comes out as UTF-8."""
    conversion = sniff(data[:SNIFF_BYTES])
    if conversion is None:
        return
    out = convert(data, conversion)
    if conversion.codec != "utf-8":
        out.decode("utf-8")  # raises if the conversion let bytes through that are not UTF-8
    if conversion.cr_line_ends:
        assert b"\r" not in out


@FUZZ
@given(st.binary(max_size=4096))
def test_fuzz_any_bytes_are_sniffed_and_converted(data):
    _sniffed_and_converted(data)


@FUZZ
@given(mutated([LOG[:20000]]), st.sampled_from(sorted(ENCODINGS)))
def test_fuzz_mutated_real_log_in_every_encoding(text, encoding):
    """The real kernel log (gpud), mutated, in each encoding a paste arrives in."""
    _sniffed_and_converted(ENCODINGS[encoding](text.encode("utf-8", "replace").decode("utf-8")))
