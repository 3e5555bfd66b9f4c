"""The one sanitiser for text out (gpuhealth.inert): escapes from evidence become visible, never raw."""

from gpuhealth.inert import one_line, visible


def test_escape_sequences_become_visible():
    hostile = "python\x1b]0;owned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x1b\\\x1b[8mhidden\x9b31m"
    shown = visible(hostile)
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in shown)
    assert shown.startswith("python\\x1b]0;owned\\x07\\x1b[2J")
    assert "\\x9b31m" in shown


def test_visible_keeps_lines_and_tabs_one_line_does_not():
    assert visible("a\tb\nc") == "a\tb\nc"
    assert one_line("host\nsudo rm -rf /\r") == "host\\x0asudo rm -rf /\\x0d"
    assert "\n" not in one_line("a\u2028b") and "\\u2028" in one_line("a\u2028b")


def test_bidi_override_is_shown():
    assert visible("safe\u202eexe.sh") == "safe\\u202eexe.sh"


def test_plain_text_is_returned_as_is():
    text = "NVRM: Xid (PCI:0000:19:00): 48, pid=1248209, name=python3.10 — ok ✓"
    assert visible(text) is text and one_line(text) is text
