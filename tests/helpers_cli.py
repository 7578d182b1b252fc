"""The command line run in this process, for tests of what it prints."""
from __future__ import annotations

from bot.cli.main import main


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """`flagsweep ARGS` in this process: (exit code, stderr); argparse's exit is caught like a return."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    return code, err


def one_line(err: str) -> str:
    """The one line a refusal printed (no traceback), asserted to be one."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
