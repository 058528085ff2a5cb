"""Filter ``systemd_escape``: one value as one word of a systemd command line.

Units template ``ExecStart=`` lines from inventory values. systemd splits such a line on
whitespace, expands ``%`` specifiers over the whole line, and substitutes ``$VAR``/``${VAR}``
in each word when it runs the command: a model name like ``tiny; touch /tmp/x`` would
become three arguments, and ``100%`` or ``$HOME`` would change. Quoting every value keeps
one value one argument, byte for byte. The rules are documented in ``systemd_escape.yml``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

# Words made only of these characters mean the same to systemd quoted or not: returned bare
# so the units stay readable. Anything else (space, quotes, backslash, ';', '%', '$', ...)
# is quoted.
BARE_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape_char(char: str) -> str:
    """One character inside a double-quoted systemd word."""
    if char in C_ESCAPES:
        return C_ESCAPES[char]
    if char == "%":
        return "%%"  # a specifier otherwise
    if char == "$":
        return "$$"  # an environment variable otherwise
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\x{ord(char):02x}"
    return char


def _word(value: Any) -> str:
    """One argument, quoted for systemd when it needs to be."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise AnsibleFilterError(
            f"systemd_escape: {value!r} is a {type(value).__name__}, not a string or a number; "
            "pass each command-line argument as a string")
    text = str(value)
    if "\0" in text:
        raise AnsibleFilterError(f"systemd_escape: {text!r} contains a NUL byte, which no command-line "
                                 "argument can hold; remove it from the value")
    if BARE_WORD.fullmatch(text):
        return text
    return '"' + "".join(_escape_char(char) for char in text) + '"'


def systemd_escape(value: Any) -> str:
    """``value`` (a string or number) as one systemd command-line word; a list as its words
    joined by single spaces, each element one argument."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return " ".join(_word(item) for item in value)
    return _word(value)


class FilterModule:
    """Ansible entry point for the ``systemd_escape`` filter."""

    def filters(self) -> dict[str, Callable[..., str]]:
        return {"systemd_escape": systemd_escape}
