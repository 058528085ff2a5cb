"""Filter ``bench_lengths``: the benchmark's prompt and answer lengths, fitted to the served context.

vLLM refuses a request whose prompt and answer together exceed the served ``max_model_len``
(``/v1/models`` reports it per model), so a benchmark whose lengths do not fit measures nothing
but refusals. Unset lengths are fitted to the context; a length the user set that does not fit is
refused, naming the variable, its value and the served limit. The rules are documented in the
sidecar ``bench_lengths.yml``.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

# What an unset length becomes when the context allows it (prompt 1024, answer 128 tokens).
WANTED_INPUT = 1024
WANTED_OUTPUT = 128


def _length(name: str, value: Any) -> int | None:
    """None when unset; else a whole number of at least 1."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(value) < 1:
        raise AnsibleFilterError(f"bench_lengths: {name}={value!r} is not a number of tokens (1 or more). "
                                 f"Fix: set {name} to a whole number, or leave it unset to fit the served context.")
    return int(value)


def bench_lengths(max_model_len: Any, input_len: Any = None, output_len: Any = None,
                  margin: Any = 16) -> dict[str, Any]:
    """input_len, output_len (fitted or as set), the budget, and errors (empty when they fit)."""
    limit = _length("max_model_len", max_model_len)
    if limit is None:
        raise AnsibleFilterError("bench_lengths: the served max_model_len is unknown (/v1/models reports none)")
    budget = limit - int(margin)
    wanted_in, wanted_out = _length("bench_input_len", input_len), _length("bench_output_len", output_len)
    result: dict[str, Any] = {"max_model_len": limit, "budget": budget, "errors": []}
    served = (f"the served model's max_model_len {limit} less a margin of {int(margin)} for the tokens the server adds "
              f"around a prompt ({budget})")
    if budget < 2:
        result["errors"].append(f"{served} leaves no room for a prompt and an answer. Fix: serve a longer context "
                                "(vllm_serve_max_model_len).")
        return {**result, "input_len": wanted_in or 1, "output_len": wanted_out or 1}
    output = wanted_out if wanted_out is not None else (
        min(WANTED_OUTPUT, budget - wanted_in) if wanted_in is not None and wanted_in < budget
        else min(WANTED_OUTPUT, max(1, budget // 4)))
    prompt = wanted_in if wanted_in is not None else min(WANTED_INPUT, budget - output)
    result.update(input_len=prompt, output_len=output)
    if prompt + output > budget or prompt < 1:
        if wanted_in is not None and wanted_out is not None:
            result["errors"].append(
                f"bench_input_len={wanted_in} + bench_output_len={wanted_out} = {wanted_in + wanted_out} tokens, more "
                f"than {served}. Fix: lower them to at most {budget} together, or leave both unset to fit them.")
        elif wanted_out is not None:
            result["errors"].append(
                f"bench_output_len={wanted_out} leaves no prompt within {served}. Fix: set it to at most "
                f"{budget - 1}, or leave it unset to fit it.")
        else:
            result["errors"].append(
                f"bench_input_len={wanted_in} leaves no answer within {served}. Fix: set it to at most "
                f"{budget - 1}, or leave it unset to fit it.")
    return result


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {"bench_lengths": bench_lengths}
