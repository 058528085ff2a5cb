"""The env_file filter: docker --env-file text, and what it refuses to write."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.vllm.plugins.filter.env_file import HEADER, env_file


def test_sorted_key_value_lines_after_the_header() -> None:
    text = env_file({"VLLM_HOST_IP": "198.51.100.11", "A_FLAG": True, "PORT": 8000, "EMPTY": ""})
    assert text == f"{HEADER}\nA_FLAG=true\nEMPTY=\nPORT=8000\nVLLM_HOST_IP=198.51.100.11\n"


def test_values_are_written_literally() -> None:
    assert env_file({"X": "a b 'c' \"d\" $HOME %h"}, header="") == "X=a b 'c' \"d\" $HOME %h\n"


@pytest.mark.parametrize("variables, needle", [
    ({"X": "one\nY=two"}, "X contains a line break"),
    ({"X": "a\rb"}, "X contains a carriage return"),
    ({"X": "a\0b"}, "X contains a NUL byte"),
    ({"1X": "a"}, "'1X' is not an environment variable name"),
    ({"A-B": "a"}, "'A-B' is not an environment variable name"),
    ({"X": None}, "X is None"),
])
def test_what_an_env_file_cannot_hold_is_refused_naming_the_key(variables: dict, needle: str) -> None:
    with pytest.raises(AnsibleFilterError, match="env_file") as error:
        env_file(variables)
    assert needle.replace("X contains", "value of X contains") in str(error.value) or needle in str(error.value)
