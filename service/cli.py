"""The ``polis`` command: the engine's commands (``engine.cli``) and ``serve``, the REST service."""

from __future__ import annotations

import argparse
import sys

from engine.cli import build_parser, run_command

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    from service.server import run
    from service.settings import ServiceSettings

    overrides = {k: v for k, v in {"host": args.host, "port": args.port, "data_dir": args.data_dir}.items() if v is not None}
    run(ServiceSettings(**overrides))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``polis``: every engine command, and ``serve``."""
    parser, commands = build_parser()
    serve = commands.add_parser("serve", help="start the REST service")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--data-dir", default=None)
    serve.set_defaults(handler=_serve)
    return run_command(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
