"""The ``polis`` command: the engine's commands (``engine.cli``), ``serve`` (the REST service), ``report`` and ``token``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from engine.cli import build_parser, port_number, run_command
from service.errors import ServiceError

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    from service.server import run
    from service.settings import ServiceSettings

    overrides = {k: v for k, v in {"host": args.host, "port": args.port, "data_dir": args.data_dir}.items() if v is not None}
    run(ServiceSettings(**overrides))
    return 0


def _token_create(args: argparse.Namespace) -> int:
    from service.admission.auth import create_token
    from service.settings import ServiceSettings

    path = Path(args.file).expanduser() if args.file else ServiceSettings().auth_tokens
    if path is None:
        print("polis: give --file or set POLIS_AUTH_TOKENS to the token file", file=sys.stderr)
        return 2
    token = create_token(path, args.owner, args.role)
    # The token goes to stdout alone (so it can be captured); everything else to stderr.
    print(token)
    print(f"polis: a {args.role} token for {args.owner!r} was added to {path}; it is shown only this once", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    from engine.results.report import is_run_dir, load_report
    from engine.storage.run_layout import resolve_location
    from service.report.page import standalone_page

    run_dir = resolve_location(args.run_dir)
    if not is_run_dir(run_dir):
        print(f"polis: {run_dir} is not a run directory or a sweep root (no SOCIETY.json, SOCIETY_STEP.json "
              "or SWEEP.json)", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.write_text(standalone_page(load_report(run_dir)), encoding="utf-8")
    print(f"polis: the results page of {run_dir} is in {out} (one file: open it in a browser, offline)", file=sys.stderr)
    return 0


def _with_service_errors(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Service errors (a bad token file, a refused listen address) end the command with exit code 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(handler(args) or 0)
        except ServiceError as error:
            print(f"polis: {error}", file=sys.stderr)
            return 2

    return run


def main(argv: list[str] | None = None) -> int:
    """``polis``: every engine command, ``serve``, ``report`` and ``token create``."""
    parser, commands = build_parser()
    serve = commands.add_parser("serve", help="start the REST service")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=port_number, default=None)
    serve.add_argument("--data-dir", default=None)
    serve.set_defaults(handler=_with_service_errors(_serve))
    report = commands.add_parser("report", help="write a run's (or sweep's) results page as one standalone HTML file")
    report.add_argument("run_dir", help="the run directory or sweep root")
    report.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default: report.html)")
    report.set_defaults(handler=_report)
    token = commands.add_parser("token", help="manage the service's bearer tokens (POLIS_AUTH_TOKENS)")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="make a token for an owner; print it once and store its hash")
    create.add_argument("--owner", required=True, help="whose experiments the token's caller sees")
    create.add_argument("--role", choices=["user", "admin"], default="user", help="an admin sees every owner's experiments")
    create.add_argument("--file", default=None, help="the token file (default: POLIS_AUTH_TOKENS)")
    create.set_defaults(handler=_with_service_errors(_token_create))
    return run_command(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
