"""Check a `vllm serve` command the way vLLM itself would, without starting an engine.

Run inside the serving image, by tasks/check_command.yml, before a change is
written or anything stops: `python3 check_serve_command.py serve MODEL --flag ...`
(the unit's command without its leading `vllm`). vLLM's own argument parser
reads the arguments (an unknown flag, a value of the wrong type), then vLLM
builds the model's configuration from them (a max_model_len below 1 or above
what the model allows, a dtype it cannot use, ...): the mistakes that would
otherwise stop a serving cluster and only then fail. Nothing is loaded onto a
GPU and nothing listens. Exit 0 when vLLM accepts the command; otherwise vLLM's
own message is on stderr and the exit status is not 0; 3 when this vLLM has
no parser of that shape (the check cannot run: the role warns and goes on).
"""
from __future__ import annotations

import sys


def parser():
    """vLLM's `vllm` command-line parser with its `serve` subcommand, as `vllm` builds it."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # vLLM before 0.11 kept it in vllm.utils
        from vllm.utils import FlexibleArgumentParser
    from vllm.entrypoints.cli.serve import ServeSubcommand

    command = ServeSubcommand()
    top = FlexibleArgumentParser(prog="vllm")
    command.subparser_init(top.add_subparsers(dest="subparser", required=True))
    return top, command


CANNOT_CHECK = 3


def check(argv: list[str]) -> None:
    try:
        top, command = parser()
    except ImportError as error:
        print(f"cannot check with this vLLM: {error}", file=sys.stderr)
        sys.exit(CANNOT_CHECK)
    args = top.parse_args(argv)  # exits 2 with vLLM's usage message on a bad argument
    command.validate(args)
    if getattr(args, "model_tag", None):  # `vllm serve MODEL`: what vLLM's serve command does with it
        args.model = args.model_tag
    from vllm.engine.arg_utils import AsyncEngineArgs

    AsyncEngineArgs.from_cli_args(args).create_model_config()


if __name__ == "__main__":
    check(sys.argv[1:])
    print("vLLM accepts the command")
