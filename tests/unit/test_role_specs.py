"""Each role's meta/argument_specs.yml and defaults/main.yml say the same thing.

ansible-doc and the role's argument validation read the spec; the play reads defaults/main.yml.
When they drift, the documentation promises a default the role does not use, or validation
passes a value the role never gets. Rules, for every role that has an argument spec:

- (a) every entry point has the same options (the entry points share one spec);
- (b) every key of defaults/main.yml is an option of the spec, whose ``default`` is the raw
  YAML value of defaults/main.yml (template strings compared as text; a defaults value of
  null matches an option without ``default``);
- (c) every option of the spec is a key of defaults/main.yml, except a ``required: true``
  option, which must not be in defaults/main.yml (a default there would make it never missing);
- (d) a required option, at any depth, does not carry a ``default`` in the spec.

One test case per role and key, so a failure names both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
MAIN = "main"


def load_yaml(path: Path) -> Any:
    """The raw YAML data of ``path``: Jinja templates stay plain strings."""
    return yaml.safe_load(path.read_text())


def spec_roles() -> list[str]:
    """The roles that declare an argument spec."""
    return sorted(p.parents[1].name for p in ROLES.glob("*/meta/argument_specs.yml"))


def entry_points(role: str) -> dict[str, Any]:
    """The role's entry points, by name, as its argument spec declares them."""
    return load_yaml(ROLES / role / "meta" / "argument_specs.yml")["argument_specs"]


def reference_entry_point(role: str) -> str:
    """``main``, or the first entry point of a role without one (dgx_spark's ``settings``, which its
    preflight validates explicitly, once per run, rather than on every include of the role)."""
    points = entry_points(role)
    return MAIN if MAIN in points else next(iter(points))


def options(role: str) -> dict[str, Any]:
    """The options of the role's reference entry point: the spec the other entry points must share."""
    return entry_points(role)[reference_entry_point(role)].get("options") or {}


def defaults(role: str) -> dict[str, Any]:
    """The role's defaults/main.yml; a role without one has no defaults."""
    path = ROLES / role / "defaults" / "main.yml"
    return (load_yaml(path) or {}) if path.is_file() else {}


def nested_options(spec: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every option of ``spec`` with its dotted path, sub-options (``options:``) included."""
    found: list[tuple[str, dict[str, Any]]] = []
    for name, option in spec.items():
        path = f"{prefix}{name}"
        found.append((path, option))
        found += nested_options(option.get("options") or {}, f"{path}.")
    return found


def cases(pairs: list[tuple[str, str]]) -> list[Any]:
    """pytest parameters named ``role:key``, the two things a failure has to name."""
    return [pytest.param(role, name, id=f"{role}:{name}") for role, name in pairs]


ENTRY_POINTS = cases([(r, e) for r in spec_roles() for e in entry_points(r) if e != reference_entry_point(r)])
DEFAULT_KEYS = cases([(r, k) for r in spec_roles() for k in defaults(r)])
SPEC_OPTIONS = cases([(r, o) for r in spec_roles() for o in options(r)])
REQUIRED_OPTIONS = cases([(r, path) for r in spec_roles()
                          for path, option in nested_options(options(r)) if option.get("required")])


@pytest.mark.parametrize(("role", "entry_point"), ENTRY_POINTS)
def test_entry_points_share_one_spec(role: str, entry_point: str) -> None:
    """(a)"""
    theirs = entry_points(role)[entry_point].get("options") or {}
    ours = options(role)
    differing = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    assert not differing, (f"role {role}: entry point {entry_point!r} differs from {MAIN!r} in "
                           f"options {differing}")


@pytest.mark.parametrize(("role", "key"), DEFAULT_KEYS)
def test_default_is_the_spec_default(role: str, key: str) -> None:
    """(b)"""
    spec = options(role)
    assert key in spec, f"role {role}: {key} is in defaults/main.yml but not in the argument spec"
    value = defaults(role)[key]
    if "default" not in spec[key]:
        assert value is None, (f"role {role}: {key} has no default in the argument spec, "
                               f"but defaults/main.yml sets {value!r}")
    else:
        assert spec[key]["default"] == value, (
            f"role {role}: {key} default differs: argument spec {spec[key]['default']!r}, "
            f"defaults/main.yml {value!r}")


@pytest.mark.parametrize(("role", "key"), SPEC_OPTIONS)
def test_spec_option_is_in_defaults_unless_required(role: str, key: str) -> None:
    """(c)"""
    required = bool(options(role)[key].get("required"))
    present = key in defaults(role)
    if required:
        assert not present, (f"role {role}: {key} is required: true in the argument spec, "
                             f"but defaults/main.yml sets it ({defaults(role)[key]!r})")
    else:
        assert present, f"role {role}: {key} is in the argument spec but not in defaults/main.yml"


@pytest.mark.parametrize(("role", "path"), REQUIRED_OPTIONS)
def test_required_option_has_no_default(role: str, path: str) -> None:
    """(d)"""
    option = dict(nested_options(options(role)))[path]
    assert "default" not in option, (f"role {role}: {path} is required: true but the argument "
                                     f"spec gives it default {option['default']!r}")
