"""Split an nvidia_gpu_exporter "capture bundle" into its commands' outputs.

A bundle concatenates many commands' outputs; each section starts with a banner::

    ################################################################################
    # idle :: query (-q)
    # $ nvidia-smi -q
    ################################################################################

The banner holds a title (``<phase> :: <what>``), usually a ``# $ <command>`` line, and sometimes
more ``#`` comment lines. Outputs may themselves contain ``#`` lines (``pmon``/``dmon`` headers), so
only an 80-character rule of ``#`` opens or closes a banner.
"""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError

_RULE = lazy_re(r"#{40,}")


def split_capture_bundle(text: str) -> dict[str, str]:
    """Map each section's command line (``"nvidia-smi -q"``) to its output, in file order.

    A command that runs again in a later phase (the bundles run ``nvidia-smi -q`` idle, then under
    load) keeps its first output under the bare command; the later ones are keyed
    ``"<phase> :: <command>"`` (``"load :: nvidia-smi -q"``). A section without a ``# $`` line (the
    file header, the derived field list) is keyed by its banner title. Outputs lose their trailing
    blank lines, which are the bundle's spacing, not the command's; an empty output is "".
    """
    if not isinstance(text, str):
        raise ParseError("not a capture bundle: input is not text")
    sections = _sections(text.splitlines())
    if not sections:
        raise ParseError("not a capture bundle: no '#####' section banners")
    result: dict[str, str] = {}
    for title, command, body in sections:
        key = command or title
        if key in result and command:
            phase = title.split("::", 1)[0].strip()
            key = f"{phase} :: {command}"
        base, n = key, 2
        while key in result:  # the same phase ran it twice: number it rather than lose it
            key, n = f"{base} #{n}", n + 1
        output = "\n".join(body).rstrip()
        result[key] = output + "\n" if output else ""
    return result


def _sections(lines: list[str]) -> list[tuple[str, str, list[str]]]:
    """(title, command, output lines) per banner; text before the first banner is dropped."""
    sections: list[tuple[str, str, list[str]]] = []
    i = 0
    while i < len(lines):
        if not _RULE.fullmatch(lines[i].strip()):
            if sections:
                sections[-1][2].append(lines[i])
            i += 1
            continue
        # A rule opens a banner only if comment lines and a closing rule follow it.
        end = i + 1
        while end < len(lines) and lines[end].startswith("#") and not _RULE.fullmatch(lines[end].strip()):
            end += 1
        if end == i + 1 or end >= len(lines) or not _RULE.fullmatch(lines[end].strip()):
            if sections:
                sections[-1][2].append(lines[i])
            i += 1
            continue
        title, command = _banner(lines[i + 1 : end])
        sections.append((title, command, []))
        i = end + 1
    return sections


def _banner(comments: list[str]) -> tuple[str, str]:
    texts = [c.lstrip("#").strip() for c in comments]
    command = next((t[1:].strip() for t in texts if t.startswith("$")), "")
    title = next((t for t in texts if t and not t.startswith("$")), command)
    return title, command
