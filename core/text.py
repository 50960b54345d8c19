"""Text from outside (a cache document, an import) made safe to show on a terminal.

A set's or a candidate's name, a device name, a failure's reason: whatever a cache document or
an imported file says is shown by ``wgtune cache list/show`` and written to the log. Printed raw,
a name holding ``ESC [2J`` clears the user's screen, one holding a carriage return or a bidi
override (U+202E) makes a line say something it does not. :func:`printable` escapes every
character that is not printable (controls, ANSI escapes' ESC, format characters, separators
other than the space, surrogates, unassigned code points) as a Python escape (``\\x1b``,
``\\u202e``), and can cut a long text short. Standard library only: the page shows these too.
"""

from __future__ import annotations

import json

__all__ = ["json_kind", "printable", "shown", "shown_json"]

ELLIPSIS = "…"


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: object, limit: int | None = None) -> str:
    """``text`` (``str()`` of it when not a str) with every non-printable character escaped.

    ``str.isprintable`` decides: the space is printable, every other "Other" (Cc, Cf, Cs, Co, Cn)
    or "Separator" (Zs, Zl, Zp) character is not. A text of printable characters comes back as
    it is (the common case costs one C call). ``limit``: at most that many characters of the
    original are kept, then an ellipsis.
    """
    text = text if isinstance(text, str) else str(text)
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]
    if not text.isprintable():
        text = "".join(char if char.isprintable() else _escape(char) for char in text)
    return text + ELLIPSIS if cut else text


def shown(value: object, limit: int = 60) -> str:
    """How an error message quotes a value read from outside: its ``repr`` (which says its type:
    ``'7'`` is a string, ``7`` a number), printable and at most about ``limit`` characters."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # an int too long to write out, nesting too deep
        text = f"<{type(value).__name__}>"
    return printable(text, limit)


def shown_json(value: object, limit: int = 60) -> str:
    """How an error message quotes a value read from a JSON document: as JSON writes it (``null``,
    ``"7"``, ``7``), printable and at most about ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__}>"
    return printable(text, limit)


def json_kind(value: object) -> str:
    """What a value read from JSON is, as JSON names it: ``an object``, ``an array``, ``text``,
    ``a number``, ``true``, ``false`` or ``null``."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "a number"
    return {dict: "an object", list: "an array", str: "text"}.get(type(value), type(value).__name__)
