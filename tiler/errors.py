"""The error tree. The CLI catches `TilerError` alone: one line on stderr, exit 2. Anything else is a bug."""

from __future__ import annotations


class TilerError(Exception):
    """Root of every error caused by the user's input (shape, chip, knob, file)."""


class ConfigError(TilerError, ValueError):
    """A hardware profile or search-space file is malformed (names the file and the key)."""


class ProblemError(TilerError, ValueError):
    """A problem field (shape, dtype, layout) is missing or out of range."""


class SpaceError(TilerError, ValueError):
    """A knob is unknown, a pinned value is outside its domain, or a tiling is malformed."""


class LibraryError(TilerError, ValueError):
    """A library file (`tiler.library/v1`) cannot be used: unreadable, larger than tiler.io.FILE_BYTES_MAX, not
    JSON, or an entry whose fields are not what a look-up reads (names the file, the entry and the field)."""


class InfeasibleError(TilerError):
    """No tiling satisfies the capacity rules; the message names the rule that rejected the most."""


# the characters str.splitlines() breaks a line at: a message quoting a user's text (a CSV header, a cell, a key)
# may hold any of them, and the CLI's error is one line
_BREAKS = {
    c: f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
    for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
}


def one_line(text: str) -> str:
    """`text` with every line break written as its escape (`\\n`, `\\x85`, ...): what the CLI prints as its one
    error line, whatever the user's file put into the message."""
    return text.strip().translate(str.maketrans(_BREAKS))


def closest(name: str, choices) -> str:
    """A hint for an unknown name: the close matches, else the full sorted list."""
    import difflib

    choices = sorted(choices)
    near = difflib.get_close_matches(name, choices, n=3)
    if near:
        return f"did you mean {', '.join(near)}? (known: {', '.join(choices)})"
    return f"known: {', '.join(choices)}"
