"""The ``x402lab`` command line (``x402lab <command>`` or ``python -m x402lab <command>``).

One module per command group. To add a command, write ``x402lab/cli/<name>.py`` with
``HELP`` (one line), ``configure(parser)`` (adds its arguments) and ``run(args) -> int``,
then add ``"<name>"`` to ``COMMANDS``. Command modules import heavy things inside ``run``,
so ``x402lab --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from x402lab.errors import X402LabError

COMMANDS: tuple[str, ...] = ("serve", "ledger", "report", "models", "prices", "demo", "plan")


class DefaultsFormatter(argparse.HelpFormatter):
    """``--help`` that shows each option's default (when it has a meaningful one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        meaningless = default is None or default is False or default == argparse.SUPPRESS
        if meaningless or "%(default)" in text or "default" in text:
            return text
        if action.option_strings or action.nargs in ("?", "*"):
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            text += f" (default: {shown})".replace("%", "%%")
        return text


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = DefaultsFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _show_defaults(sub)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command of COMMANDS registered."""
    from x402lab import __version__

    parser = argparse.ArgumentParser(
        prog="x402lab", description="x402lab: paid x402 services as tables, and their emulator."
    )
    parser.add_argument("--version", action="version", version=f"x402lab {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"x402lab.cli.{name}")
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(sub)
        sub.set_defaults(_run=module.run)
    _show_defaults(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (2 for bad arguments or settings)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except X402LabError as exc:
        print(f"x402lab {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
