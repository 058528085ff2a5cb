"""Filter ``env_file``: a dict of environment variables as a ``docker run --env-file`` file.

The units give their containers a root-only environment file. Docker reads it line by line,
``KEY=value``, taking the value literally (no quotes removed, no expansion), so a value with a
line break would end the variable there and start another one: refused here, naming the key,
rather than written. The rules are documented in ``env_file.yml``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER = "# Managed by dgx_spark.vllm: changes here are overwritten. Read by `docker run --env-file`."


def _value(key: str, value: Any) -> str:
    """The text of one value; booleans as true/false, as shells and Python's env parsers expect."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or isinstance(value, (Mapping, list, tuple)):
        raise AnsibleFilterError(f"env_file: {key} is {value!r}; environment values are strings or numbers")
    text = str(value)
    for char, name in (("\n", "a line break"), ("\r", "a carriage return"), ("\0", "a NUL byte")):
        if char in text:
            raise AnsibleFilterError(f"env_file: the value of {key} contains {name}, which an environment "
                                     "file cannot hold (it would end the variable there); remove it")
    return text


def env_file(variables: Mapping[str, Any], header: str = HEADER) -> str:
    """``KEY=value`` lines sorted by key, after a comment ``header`` (empty: none), ending with a newline."""
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError(f"env_file: expects a dict of environment variables, got {type(variables).__name__}")
    lines = [header] if header else []
    for key in sorted(variables):
        if not isinstance(key, str) or not NAME.fullmatch(key):
            raise AnsibleFilterError(f"env_file: {key!r} is not an environment variable name "
                                     "(letters, digits and _, not starting with a digit)")
        lines.append(f"{key}={_value(key, variables[key])}")
    return "\n".join(lines) + "\n"


class FilterModule:
    """Ansible entry point for the ``env_file`` filter."""

    def filters(self) -> dict[str, Callable[..., str]]:
        return {"env_file": env_file}
