"""The docs promise only what the collection has.

A README command that names a playbook, a tag or a setting that is gone fails for the first user who
copies it; a setting the docs name under an old spelling is silently ignored by Ansible. So:

- (a) every ``ansible-playbook`` command in the README's *Everyday operations* runs an existing
  playbook, names its inventory (and the vault password file when that inventory reads a vault),
  and sets only settings some role's argument spec (or the playbook's own header) declares and
  tags some playbook uses;
- (b) every name in ``README.md`` and ``docs/*.md`` that looks like a role setting
  (``dgx_spark_*``, ``vllm_serve_*``, ``model_*``, ...) is an option of some role's argument spec,
  a derived value of a role's ``vars/main.yml`` or a fact a role publishes;
- (c) every role README names every option of its role's argument spec.

Pure Python over the files: no process, no Ansible.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
PLAYBOOKS = REPO / "playbooks"
README = REPO / "README.md"
OPERATIONS = "## Everyday operations"
COLLECTION_PREFIX = "dgx_spark.vllm."

# The prefixes of the roles' public settings (each role prefixes its own).
SETTING_PREFIXES = ("dgx_spark", "vllm_serve", "model", "endpoint", "ib_network", "docker_image", "ray",
                    "firewall", "bench", "fabric_transfer", "serving_guard", "serving_rollout")
# A setting-like name: not inside another word, a path or a module name (dgx_spark.vllm.bench_report);
# `prefix_*` and a trailing `_` name a family of settings.
SETTING = re.compile(r"(?<![\w./-])(?:%s)_[a-z0-9_]*\*?" % "|".join(SETTING_PREFIXES))
# Not settings, though they look like one: the nftables table of the firewall, vLLM's file of the
# variables its Ray executor does not copy to the workers.
NOT_SETTINGS = {"dgx_spark_vllm", "ray_non_carry_over_env_vars"}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def spec_options(role: Path) -> set[str]:
    """Every option of every entry point of the role's argument spec."""
    path = role / "meta" / "argument_specs.yml"
    if not path.is_file():
        return set()
    points = load_yaml(path)["argument_specs"]
    return {name for point in points.values() for name in (point.get("options") or {})}


def all_spec_options() -> set[str]:
    return {name for role in ROLES.iterdir() for name in spec_options(role)}


def walk(node: Any) -> Iterator[Any]:
    """Every mapping and list inside ``node``, depth first."""
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        yield from walk(child)


def published_names() -> set[str]:
    """Derived values (roles' vars/main.yml) and facts the roles set (set_fact keys)."""
    names: set[str] = set()
    for path in ROLES.glob("*/vars/main.yml"):
        names |= set(load_yaml(path) or {})
    for path in ROLES.glob("*/tasks/*.yml"):
        for node in walk(load_yaml(path)):
            if isinstance(node, dict) and isinstance(node.get("ansible.builtin.set_fact"), dict):
                names |= set(node["ansible.builtin.set_fact"])
    return names


def known_settings() -> set[str]:
    return all_spec_options() | published_names()


def playbook_files() -> list[Path]:
    return sorted(PLAYBOOKS.rglob("*.yml")) + [REPO / "site.yml"]


def playbook_tags() -> set[str]:
    """Every tag a play, role or task of the playbooks carries."""
    tags: set[str] = set()
    for path in playbook_files():
        for node in walk(load_yaml(path)):
            if isinstance(node, dict) and "tags" in node:
                value = node["tags"]
                tags |= set(value if isinstance(value, list) else [value])
    return tags


def documented_extra_vars(playbook: Path) -> set[str]:
    """Settings the playbook's header comment documents as ``-e NAME=...``."""
    header = "".join(line for line in playbook.read_text().splitlines(keepends=True) if line.startswith("#"))
    return set(re.findall(r"-e\s+'?([a-z_][a-z0-9_]*)=", header))


def section(text: str, title: str) -> str:
    """The markdown section under ``title``, up to the next heading of its level."""
    start = text.index(title + "\n")
    rest = text[start + len(title) + 1:]
    end = re.search(r"^## ", rest, re.MULTILINE)
    return rest[:end.start()] if end else rest


def shell_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)


def shell_commands(block: str) -> list[list[str]]:
    """Each command line of a shell block (continuations joined, comments dropped), as words."""
    joined = re.sub(r"\\\n", " ", block)
    return [shlex.split(line, comments=True) for line in joined.splitlines() if shlex.split(line, comments=True)]


def playbook_runs() -> list[list[str]]:
    ops = section(README.read_text(), OPERATIONS)
    return [words for block in shell_blocks(ops) for words in shell_commands(block)
            if words[0] == "ansible-playbook"]


VALUE_OPTIONS = {"-i", "--inventory", "-e", "--extra-vars", "-t", "--tags", "--skip-tags", "-l", "--limit",
                 "--vault-password-file", "--vault-id", "-u", "--user", "-f", "--forks"}


def parse_run(words: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The positional arguments (playbooks) and each option's values of an ansible-playbook line."""
    positional: list[str] = []
    options: dict[str, list[str]] = {}
    rest = iter(words[1:])
    for word in rest:
        name, eq, value = word.partition("=")
        if word.startswith("--") and eq and name in VALUE_OPTIONS:
            options.setdefault(name, []).append(value)
        elif word in VALUE_OPTIONS:
            options.setdefault(word, []).append(next(rest))
        elif word.startswith("-"):
            options.setdefault(word, [])
        else:
            positional.append(word)
    return positional, options


def playbook_path(name: str) -> Path:
    """dgx_spark.vllm.X -> playbooks/X.yml; anything else a path from the checkout."""
    if name.startswith(COLLECTION_PREFIX):
        return PLAYBOOKS / (name[len(COLLECTION_PREFIX):] + ".yml")
    return REPO / name


def extra_var_names(value: str) -> set[str]:
    """The names an ``-e`` value sets: key=value pairs, or a YAML/JSON mapping."""
    if value.lstrip().startswith("{"):
        return set(yaml.safe_load(value))
    return {pair.partition("=")[0] for pair in value.split()}


def inventory_reads_vault(inventory: str) -> bool:
    return any("vault_" in path.read_text() for path in (REPO / inventory).rglob("*.yml"))


RUNS = playbook_runs()


def run_id(words: list[str]) -> str:
    return " ".join(words[1:4])


# The README is the way in, not the manual: what does not fit goes to docs/ (issue 29).
README_MAX_LINES = 350


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_the_operations_section_has_runs() -> None:
    # The section is found and read: without this, (a) would pass on nothing.
    assert len(RUNS) >= 8, RUNS


@pytest.mark.parametrize("words", RUNS, ids=[run_id(words) for words in RUNS])
def test_an_operations_command_runs_an_existing_playbook_on_a_named_inventory(words: list[str]) -> None:
    positional, options = parse_run(words)
    assert positional, f"no playbook in: {shlex.join(words)}"
    for name in positional:
        assert playbook_path(name).is_file(), f"{name}: no such playbook ({shlex.join(words)})"
    inventories = options.get("-i", []) + options.get("--inventory", [])
    assert inventories, f"no -i in: {shlex.join(words)}"
    for inventory in inventories:
        assert (REPO / inventory).is_dir(), f"{inventory}: no such inventory"
        if inventory_reads_vault(inventory):
            assert "--vault-password-file" in options or "--ask-vault-pass" in options or "-J" in options, \
                f"{inventory} reads a vault: add --vault-password-file ({shlex.join(words)})"


@pytest.mark.parametrize("words", RUNS, ids=[run_id(words) for words in RUNS])
def test_an_operations_command_sets_only_settings_and_tags_that_exist(words: list[str]) -> None:
    positional, options = parse_run(words)
    allowed = all_spec_options() | {name for playbook in positional if playbook_path(playbook).is_file()
                                    for name in documented_extra_vars(playbook_path(playbook))}
    for value in options.get("-e", []) + options.get("--extra-vars", []):
        unknown = extra_var_names(value) - allowed
        assert not unknown, f"{sorted(unknown)}: in no role's argument spec ({shlex.join(words)})"
    tags = playbook_tags()
    for value in options.get("--tags", []) + options.get("-t", []):
        unknown = set(value.split(",")) - tags
        assert not unknown, f"tags {sorted(unknown)} are used by no playbook ({shlex.join(words)})"


def doc_files() -> list[Path]:
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def named_settings(text: str) -> set[str]:
    """The setting-like names of ``text``, less role names and tags (``--tags ib_network_bandwidth``)."""
    others = NOT_SETTINGS | {path.name for path in ROLES.iterdir()} | playbook_tags()
    return {name for name in SETTING.findall(text) if name not in others}


def is_known(name: str, known: set[str]) -> bool:
    """A name, or a family (``ray_node_*``, ``docker_image_registry_``) with at least one member."""
    stem = name.rstrip("*")
    if name.endswith("*") or stem.endswith("_"):
        return any(setting.startswith(stem) for setting in known)
    return name in known


@pytest.mark.parametrize("path", doc_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_setting_the_docs_name_exists(path: Path) -> None:
    known = known_settings()
    unknown = sorted(name for name in named_settings(path.read_text()) if not is_known(name, known))
    assert unknown == [], f"{path.relative_to(REPO)} names settings no role declares or sets: {unknown}"


def test_the_setting_pattern_finds_settings_and_skips_lookalikes() -> None:
    text = ("`vllm_serve_api_key`, `model_name`, `docker_image_registry_*`, `dgx_spark.vllm.bench_report`, "
            "roles/ray_node/README.md, vault_vllm_serve_api_key, serving_node.py, role `ray_head`, "
            "`inet dgx_spark_vllm`, RAY_AUTH_MODE, ray_worker_extra_args.")
    assert named_settings(text) == {"vllm_serve_api_key", "model_name", "docker_image_registry_*",
                                    "ray_worker_extra_args"}


def spec_roles() -> list[str]:
    return sorted(path.parents[1].name for path in ROLES.glob("*/meta/argument_specs.yml"))


@pytest.mark.parametrize("role", spec_roles())
def test_a_role_readme_names_every_option_of_its_spec(role: str) -> None:
    readme = ROLES / role / "README.md"
    assert readme.is_file(), f"roles/{role} has an argument spec but no README.md"
    text = readme.read_text()
    missing = sorted(name for name in spec_options(ROLES / role) if not re.search(rf"\b{name}\b", text))
    assert missing == [], f"roles/{role}/README.md does not name: {missing}"


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def relative_links(markdown: str) -> list[str]:
    return [target for target in re.findall(r"\]\(([^)\s]+)\)", markdown) if "://" not in target]


@pytest.mark.parametrize("path", doc_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_of_the_docs_resolves(path: Path) -> None:
    broken = []
    for target in relative_links(path.read_text()):
        file, _hash, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(target)
        elif anchor and anchor not in heading_anchors(linked.read_text()):
            broken.append(target)
    assert broken == [], f"{path.relative_to(REPO)}: links to nothing: {broken}"


def test_anchors_follow_github() -> None:
    assert heading_anchors("## The fabric gate: bandwidth before serving\n### Benchmark: `playbooks/bench.yml`\n") \
        == {"the-fabric-gate-bandwidth-before-serving", "benchmark-playbooksbenchyml"}
