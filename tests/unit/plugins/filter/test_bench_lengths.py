"""The bench_lengths filter: unset lengths fit the served context (prompt and answer within
max_model_len less the margin); a length the user set that does not fit is refused naming the
variable, its value and the served limit."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.vllm.plugins.filter.bench_lengths import bench_lengths


def fitted(limit: Any, prompt: Any = None, answer: Any = None) -> tuple[int, int]:
    result = bench_lengths(limit, prompt, answer)
    assert result["errors"] == []
    assert result["input_len"] + result["output_len"] <= result["budget"] == int(limit) - 16
    return result["input_len"], result["output_len"]


def test_a_long_context_gets_the_usual_lengths() -> None:
    assert fitted(4096) == (1024, 128)


def test_a_short_context_gets_lengths_that_fit() -> None:
    # The sandbox's 256: the old defaults (1024 + 128) got no request through.
    assert fitted(256) == (180, 60)
    assert fitted("256") == (180, 60)  # as Ansible may render it


def test_one_length_set_fits_the_other_around_it() -> None:
    assert fitted(256, prompt=200) == (200, 40)
    assert fitted(256, answer=200) == (40, 200)
    assert fitted(8192, answer=16) == (1024, 16)


def test_set_lengths_that_fit_are_kept() -> None:
    assert fitted(256, 200, 40) == (200, 40)


def test_set_lengths_that_do_not_fit_are_refused_naming_both_and_the_limit() -> None:
    errors = bench_lengths(256, 1024, 128)["errors"]
    assert errors == ["bench_input_len=1024 + bench_output_len=128 = 1152 tokens, more than the served model's "
                      "max_model_len 256 less a margin of 16 for the tokens the server adds around a prompt (240). "
                      "Fix: lower them to at most 240 together, or leave both unset to fit them."]


@pytest.mark.parametrize("prompt, answer, named", [(240, None, "bench_input_len=240"),
                                                   (None, 240, "bench_output_len=240"),
                                                   (5000, None, "bench_input_len=5000")])
def test_one_set_length_that_leaves_no_room_is_refused(prompt: Any, answer: Any, named: str) -> None:
    errors = bench_lengths(256, prompt, answer)["errors"]
    assert len(errors) == 1 and errors[0].startswith(named) and "max_model_len 256" in errors[0]
    assert "at most 239" in errors[0]


def test_a_context_too_short_for_anything_is_refused() -> None:
    assert "leaves no room" in bench_lengths(17)["errors"][0]


@pytest.mark.parametrize("value", [0, -5, "x", 1.5, True])
def test_a_length_that_is_not_tokens_fails(value: Any) -> None:
    with pytest.raises(AnsibleFilterError, match=r"bench_input_len=.* is not a number of tokens"):
        bench_lengths(256, value)


def test_an_unknown_limit_fails() -> None:
    with pytest.raises(AnsibleFilterError, match="max_model_len is unknown"):
        bench_lengths(None)
