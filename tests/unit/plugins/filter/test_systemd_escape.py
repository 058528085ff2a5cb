"""The systemd_escape filter: fixed cases here; systemd's own parsing of the result is
checked on a real systemd in molecule/mp/tests/test_unit_escaping.py."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.vllm.plugins.filter.systemd_escape import systemd_escape


@pytest.mark.parametrize("value, word", [
    ("tiny-llama", "tiny-llama"),
    ("/var/lib/dgx-spark-vllm:/var/lib/dgx-spark-vllm", "/var/lib/dgx-spark-vllm:/var/lib/dgx-spark-vllm"),
    ("--max-model-len=256", "--max-model-len=256"),
    (8000, "8000"),
    ("tiny; touch /tmp/x", '"tiny; touch /tmp/x"'),
    ("a b", '"a b"'),
    ("100%", '"100%%"'),
    ("%H", '"%%H"'),
    ("$HOME", '"$$HOME"'),
    ("${X}", '"$${X}"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("it's", '"it\'s"'),
    ("", '""'),
    ("modèle", '"modèle"'),
    ("a\tb\nc\rd", '"a\\tb\\nc\\rd"'),
    ("bell\x07", '"bell\\x07"'),
    (";", '";"'),
])
def test_one_value_is_one_word(value: object, word: str) -> None:
    assert systemd_escape(value) == word


def test_a_list_gives_one_word_per_element() -> None:
    assert systemd_escape(["--dtype", "float32", "a b", ""]) == '--dtype float32 "a b" ""'


@pytest.mark.parametrize("value", ["nul\0byte", None, {"a": 1}, True])
def test_what_no_argument_can_hold_is_refused(value: object) -> None:
    with pytest.raises(AnsibleFilterError, match="systemd_escape"):
        systemd_escape(value)
