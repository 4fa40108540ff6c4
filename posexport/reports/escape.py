"""What every view does to text it shows that came from a model, a folder or a runtime (model, node and
output names, file names, messages): on a terminal it never moves the cursor, clears the screen or sets
a window title; in JUnit XML it never makes the document ill-formed; in Markdown it never breaks a table
row, closes a code span or fence, or passes HTML through to a page a CI system renders."""

from __future__ import annotations

import re

# C0 controls (tab and newline kept), DEL, C1 controls (0x9b is a one-byte CSI on some terminals) and the
# bidirectional marks, embeddings, overrides and isolates, which reorder what a terminal shows.
CONTROLS = dict.fromkeys([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0), 0x200E, 0x200F,
                          *range(0x202A, 0x202F), *range(0x2066, 0x206A)])
# What XML 1.0 forbids: #x9, #xA, #xD, #x20–#xD7FF, #xE000–#xFFFD and #x10000–#x10FFFF are allowed.
XML_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Line breaks, which end a Markdown table row or a paragraph.
LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x85\u2028\u2029]")
HTML = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"}


def terminal_text(text: str) -> str:
    """``text`` with every control character dropped (newlines and tabs kept)."""
    return text.translate(CONTROLS)


def xml_text(text: str) -> str:
    """``text`` with every character XML forbids written as a visible escape (``\\x1b``)."""
    return XML_FORBIDDEN.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def md_text(text: object) -> str:
    """``text`` for a Markdown table cell or line: one line, controls dropped, ``|`` escaped, HTML's
    ``&``, ``<`` and ``>`` as entities (shown as themselves, never markup)."""
    return LINE_BREAKS.sub(" ", str(text)).translate(CONTROLS).translate(HTML).replace("|", "\\|")


def md_code(text: object) -> str:
    """``text`` as a Markdown code span: one line, controls dropped, no backtick to close it early."""
    return "`" + LINE_BREAKS.sub(" ", str(text)).translate(CONTROLS).replace("`", "'") + "`"


def md_fence(text: str, language: str = "") -> list[str]:
    """``text`` (one line) as a fenced block whose fence no run of backticks in it can close."""
    line = LINE_BREAKS.sub(" ", text).translate(CONTROLS)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", line)), default=0))
    return [fence + language, line, fence]
