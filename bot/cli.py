"""The `flagsweep` command line: global options, then one subcommand module per area.

Each `bot.cli_*` module has `register(subparsers)`, adding its subcommands with
`set_defaults(func=handler)`; a handler takes `(args, settings)` and returns an
exit code. Modules must not import torch at import time: `flagsweep --help`
stays instant.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from bot import settings as settings_mod
from state.db import StoreError

AREAS = ("bot.cli_sweep", "bot.cli_zoo", "bot.cli_history", "bot.cli_publish", "bot.cli_service")


def build_parser() -> argparse.ArgumentParser:
    """The whole parser, with every area's subcommands."""
    parser = argparse.ArgumentParser(prog="flagsweep", description="Sweep torch.compile flags over tiny transformers models and triage the results on GitHub.")
    parser.add_argument("--settings", metavar="FILE", help="TOML settings file (default: $FLAGSWEEP_SETTINGS)")
    parser.add_argument("--state", metavar="PATH", help="SQLite state file (default: $FLAGSWEEP_STATE or ~/.local/share/flagsweep/state.sqlite)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log verbosity on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in AREAS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    # PyGithub installs its own INFO handler on import; keep its retries at our level.
    logging.getLogger("github").setLevel(max(logging.WARNING, logging.getLogger().level))
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        settings = settings_mod.load(args.settings)
    except settings_mod.SettingsError as exc:
        print(f"flagsweep: settings: {exc}", file=sys.stderr)
        return 2
    if args.state:
        settings.state_path = Path(args.state)
    try:
        return int(args.func(args, settings) or 0)
    except StoreError as exc:
        # A corrupted, foreign or newer state file: say so, never reset it.
        print(f"flagsweep: state: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flagsweep: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
