"""Find the Ansible runs in the project's own files that name no inventory.

ansible.cfg names no default inventory, so such a run reaches only this machine; still, a
tool or test that forgets ``-i`` is a bug waiting for someone's ansible.cfg (or
ANSIBLE_INVENTORY) to point it at real machines. This reads shell scripts, Python, the
command tasks of YAML playbooks and the shell blocks of Markdown, and lists every
``ansible``/``ansible-playbook`` command among them without ``-i``/``--inventory``.

Python code runs playbooks only through ``support.ansible_run.playbook_command``, which
refuses an empty inventory list itself; here a Python file is checked for command lists
and shell strings it spells out.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

COMMANDS = {"ansible", "ansible-playbook"}
# Words before which a command name is read or printed, not run.
NOT_RUN = {"command", "which", "type", "echo", "printf", "hash"}
# What a run without an inventory may still do: print its version or help.
HARMLESS = {"--version", "--help", "-h"}
OPERATORS = {";", "&&", "||", "|", "&", "(", ")", "((", "))", ";;", "|&"}
# Keys of a YAML task whose value is a command line or an argument vector.
YAML_COMMAND_KEYS = {"cmd", "argv", "command", "shell", "ansible.builtin.command", "ansible.builtin.shell"}


def names_inventory(args: Sequence[str]) -> bool:
    """Whether these arguments name an inventory (or only ask for version or help)."""
    return any(a in ("-i", "--inventory", "--inventory-file") or a.startswith(("--inventory=", "--inventory-file="))
               or (a.startswith("-i") and len(a) > 2 and not a.startswith("--")) or a in HARMLESS for a in args)


def _is_ansible(word: str) -> bool:
    return word.rsplit("/", 1)[-1].strip("\"'") in COMMANDS


def _simple_commands(line: str) -> Iterator[list[str]]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: a line continued in a way shlex does not follow
        tokens = line.split()
    command: list[str] = []
    for token in tokens:
        if token in OPERATORS:
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def shell_runs_without_inventory(text: str) -> list[str]:
    """The ansible/ansible-playbook command lines of a shell text that name no inventory."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        for command in _simple_commands(line):
            if command[0] in NOT_RUN:
                continue
            for position, word in enumerate(command):
                if _is_ansible(word) and not names_inventory(command[position + 1:]):
                    found.append(" ".join(command))
                    break
    return found


def _constant_strings(node: ast.AST) -> list[str] | None:
    """The elements of a list or tuple literal when its first one is a string constant."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return None
    values = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else "" for e in node.elts]
    return values if isinstance(node.elts[0], ast.Constant) else None


def _prose(tree: ast.AST) -> set[int]:
    """The string statements of a source (docstrings and the like): prose, not commands."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def python_runs_without_inventory(source: str) -> list[str]:
    """Command lists (["ansible-playbook", ...]) and shell strings of a Python source that name no inventory."""
    tree = ast.parse(source)
    prose = _prose(tree)
    found = []
    for node in ast.walk(tree):
        args = _constant_strings(node)
        if args and _is_ansible(args[0]) and not names_inventory(args[1:]):
            found.append(" ".join(args))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
              and " " in node.value.strip()):
            found += shell_runs_without_inventory(node.value)
    return found


def _yaml_commands(data: Any) -> Iterator[str | list[str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key in YAML_COMMAND_KEYS and isinstance(value, (str, list)):
                yield value
            yield from _yaml_commands(value)
    elif isinstance(data, list):
        for item in data:
            yield from _yaml_commands(item)


def yaml_runs_without_inventory(text: str) -> list[str]:
    """The command tasks (command/shell, string or argv) of a YAML file that run Ansible without an inventory."""
    found = []
    for document in yaml.safe_load_all(text):
        for command in _yaml_commands(document):
            if isinstance(command, str):
                found += shell_runs_without_inventory(command)
            elif command and _is_ansible(str(command[0])) and not names_inventory([str(a) for a in command[1:]]):
                found.append(" ".join(map(str, command)))
    return found


def markdown_runs_without_inventory(text: str) -> list[str]:
    """The shell blocks (```sh, ```bash, ```console) of a Markdown text that run Ansible without an inventory."""
    blocks = re.findall(r"^```(?:sh|bash|shell|console)\n(.*?)^```", text, re.M | re.S)
    return [run for block in blocks for run in shell_runs_without_inventory(block)]


def is_shell_script(path: Path) -> bool:
    try:
        first = path.open("rb").readline()
    except OSError:
        return False
    return first.startswith(b"#!") and (b"sh" in first.split(b"/")[-1])


def runs_without_inventory(path: Path) -> list[str]:
    """The Ansible runs in one file that name no inventory (nothing for a file of no known kind)."""
    if path.suffix == ".py":
        return python_runs_without_inventory(path.read_text())
    if path.suffix in (".yml", ".yaml"):
        return yaml_runs_without_inventory(path.read_text())
    if path.suffix == ".md":
        return markdown_runs_without_inventory(path.read_text())
    if path.suffix in ("", ".sh") and is_shell_script(path):
        return shell_runs_without_inventory(path.read_text())
    return []
