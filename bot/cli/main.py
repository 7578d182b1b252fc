"""The `flagsweep` command line: global options, then one subcommand module per area.

Each `bot.cli.*` area module has `register(subparsers)`, adding its subcommands with
`set_defaults(func=handler)`; a handler takes `(args, settings)` and returns an
exit code. Modules must not import torch at import time: `flagsweep --help`
stays instant. Argument values are checked by the types in `bot.cli.arguments`;
errors that only show up later are turned into one line by `bot.cli.errors`.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from bot.cli import errors as cli_errors, arguments, paths, say
from bot import settings as settings_mod

AREAS = ("bot.cli.sweep", "bot.cli.zoo", "bot.cli.history", "bot.cli.publish", "bot.cli.service", "bot.cli.culprit")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (subcommand parsers inherit it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        say.err(f"{self.prog}: {message} (see {self.prog} --help)")     # the message can quote what was typed
        self.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The whole parser, with every area's subcommands."""
    parser = Parser(prog="flagsweep", description="Sweep torch.compile flags over tiny transformers models and triage the results on GitHub.")
    parser.add_argument("--settings", metavar="FILE", type=arguments.nonempty("the settings path"),
                        help="TOML settings file (default: $FLAGSWEEP_SETTINGS)")
    parser.add_argument("--state", metavar="PATH", type=arguments.state_path,
                        help="SQLite state file (default: $FLAGSWEEP_STATE or ~/.local/share/flagsweep/state.sqlite)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log verbosity on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in AREAS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        handlers=[say.log_handler("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")])
    # PyGithub installs its own INFO handler on import; keep its retries at our level.
    logging.getLogger("github").setLevel(max(logging.WARNING, logging.getLogger().level))
    if not getattr(args, "func", None):
        say.err(parser.format_help(), end="")
        return 2
    paths.absolute_args(args)    # before anything reads a path: workers run in the checkout, not here
    try:
        settings = settings_mod.load(args.settings)
    except settings_mod.SettingsError as exc:
        say.err(f"flagsweep: settings: {exc}")
        return 2
    if args.state is not None:     # already absolute (absolute_args)
        settings = settings.at_state(Path(args.state))
    try:
        return int(args.func(args, settings) or 0)
    except KeyboardInterrupt:
        say.err("flagsweep: interrupted")
        return 130
    except Exception as exc:
        known = cli_errors.describe(exc, settings)
        if known is None:
            raise
        say.err(f"flagsweep: {known.message}")
        return known.code


if __name__ == "__main__":
    sys.exit(main())
