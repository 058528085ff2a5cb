"""The inputs_stamp filter: one digest of the collection's variables, groups and files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleUndefinedVariable

from ansible_collections.dgx_spark.vllm.plugins.filter.inputs_stamp import files_digest, inputs_stamp, stamp

HOSTS = ["spark1", "spark2"]
GROUPS = {"all": ["controller", "spark1", "spark2"], "sparks": HOSTS, "spark_head": ["spark1"],
          "spark_workers": ["spark2"], "controllers": ["controller"]}


def hostvars(**changes: Any) -> dict[str, dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {
        host: {"ansible_host_ib": f"198.51.100.1{index}", "vllm_serve_max_model_len": 256,
               "dgx_spark_fabric_address": f"198.51.100.1{index}", "ansible_user": "root",
               "ansible_facts": {"date_time": index}, "dgx_spark_preflight_passed": ["dgx_spark"]}
        for index, host in enumerate(HOSTS, start=1)}
    for name, value in changes.items():
        host, variable = name.split("__", 1)
        nodes[host][variable] = value
    return nodes


@pytest.fixture(name="collection")
def fixture_collection(tmp_path: Path) -> Path:
    for role in ("vllm_serve", "dgx_spark"):
        (tmp_path / "roles" / role / "tasks").mkdir(parents=True)
        (tmp_path / "roles" / role / "tasks" / "main.yml").write_text("---\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "playbooks").mkdir()
    return tmp_path


def test_the_same_inputs_give_the_same_stamp(collection: Path) -> None:
    first = stamp(hostvars(), HOSTS, GROUPS, collection)
    assert len(first) == 64 and first == stamp(hostvars(), HOSTS, GROUPS, collection)


@pytest.mark.parametrize("change", [
    {"spark2__vllm_serve_max_model_len": 512},
    {"spark1__vllm_serve_extra_args": ["--enforce-eager"]},
    {"spark2__ansible_host_ib": "198.51.100.99"},
    {"spark1__dgx_spark_fabric_address": "198.51.100.99"},
])
def test_a_collection_variable_of_any_node_changes_it(collection: Path, change: dict[str, Any]) -> None:
    assert stamp(hostvars(**change), HOSTS, GROUPS, collection) != stamp(hostvars(), HOSTS, GROUPS, collection)


@pytest.mark.parametrize("change", [
    {"spark1__ansible_user": "admin"},
    {"spark2__ansible_facts": {"date_time": 99}},
    {"spark1__dgx_spark_preflight_passed": ["dgx_spark", "vllm_serve"]},
    {"spark1__dgx_spark_inputs_stamp": "0" * 64},
    {"spark2__my_own_variable": 1},
])
def test_other_variables_and_the_runs_own_facts_do_not(collection: Path, change: dict[str, Any]) -> None:
    assert stamp(hostvars(**change), HOSTS, GROUPS, collection) == stamp(hostvars(), HOSTS, GROUPS, collection)


def test_the_nodes_groups_count_in_their_order(collection: Path) -> None:
    swapped = dict(GROUPS, spark_head=["spark2"], spark_workers=["spark1"])
    assert stamp(hostvars(), HOSTS, swapped, collection) != stamp(hostvars(), HOSTS, GROUPS, collection)
    other = dict(GROUPS, controllers=["controller", "another"])
    assert stamp(hostvars(), HOSTS, other, collection) == stamp(hostvars(), HOSTS, GROUPS, collection)


def test_a_changed_file_of_the_collection_changes_it_compiled_python_does_not(collection: Path) -> None:
    before = files_digest(collection)
    (collection / "plugins" / "__pycache__").mkdir()
    (collection / "plugins" / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"\0")
    (collection / "roles" / "vllm_serve" / ".pytest_cache").mkdir()
    assert files_digest(collection) == before
    (collection / "roles" / "vllm_serve" / "tasks" / "main.yml").write_text("---\n# changed\n")
    assert files_digest(collection) != before


def test_a_variable_that_cannot_be_templated_gives_no_stamp(collection: Path) -> None:
    class Undefined(dict[str, Any]):
        def __getitem__(self, name: str) -> Any:
            if name == "vllm_serve_api_key":
                raise AnsibleUndefinedVariable("'vault' is undefined")
            return super().__getitem__(name)

    nodes = hostvars()
    nodes["spark1"] = Undefined(nodes["spark1"], vllm_serve_api_key="{{ vault }}")
    assert stamp(nodes, HOSTS, GROUPS, collection) == ""


def test_the_filter_stamps_this_collection() -> None:
    assert len(inputs_stamp(hostvars(), HOSTS, GROUPS)) == 64
