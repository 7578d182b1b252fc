"""What the command line prints reaches the terminal as text: control characters from model code or GitHub shown,
never obeyed (bot.cli.say, bot.text.terminal)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from bot.text.terminal import visible
from harness.engine.pool import PROJECT_ROOT
from state import db, runs
from tests.helpers_cli import run_cli
from tests.historydata import crash, night, store_run

HOSTILE = "\x1b[2J\rRuntimeError: boom\x07\x9b31m\u202e"
# Anything a terminal obeys: C0 but tab and newline, DEL, C1, the bidirectional controls.
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_each_control_character_is_written_as_its_escape_and_lines_and_tabs_stay() -> None:
    assert visible(HOSTILE) == "\\x1b[2J\\x0dRuntimeError: boom\\x07\\x9b31m\\u202e"
    assert visible("a\tb\r\nc\n") == "a\tb\nc\n"
    assert visible("KeyError: 'ü' — 日本") == "KeyError: 'ü' — 日本"


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """`flagsweep ARGS` in this process: (exit code, stdout, stderr)."""
    from bot.cli.main import main

    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _hostile_store(tmp_path: Path) -> tuple[Path, int]:
    """Two nights, in the second BertModel crashing under the flag with the HOSTILE signature; then a night that
    failed with HOSTILE as its reason (as a provider's error quotes pip)."""
    state = tmp_path / "state.sqlite"
    conn = db.connect(state)
    store_run(conn, night(c_crashes=False), nightly="2026-11-01")
    store_run(conn, [crash(o.model, o.config, sig=HOSTILE) if o.model == "BertModel" and o.config != "baseline"
                     else o for o in night(c_crashes=False)], nightly="2026-11-02")
    failed = store_run(conn, night(), nightly="2026-11-03", finish=False)
    runs.finish_run(conn, failed, status="failed", reason=HOSTILE)
    conn.close()
    return state, failed


def test_a_signature_with_escape_sequences_is_shown_not_obeyed_by_diff_and_runs_show(tmp_path: Path, capsys) -> None:
    """A crash whose signature holds a clear-screen sequence, a carriage return, a bell, a C1 CSI and a right-to-left
    override, stored as a real run, then printed by `flagsweep diff`; the same as a failed run's reason, printed by
    `flagsweep runs show`."""
    state, failed = _hostile_store(tmp_path)
    for args in (["diff", "1", "2"], ["runs", "show", str(failed)]):
        code, out, err = _cli(capsys, "--state", str(state), *args)
        assert code == 0, err
        assert "\\x1b[2J\\x0dRuntimeError: boom\\x07" in out and not OBEYED.search(out + err), out


def test_json_output_keeps_the_signature_exactly(tmp_path: Path, capsys) -> None:
    state, _ = _hostile_store(tmp_path)
    code, out, _ = _cli(capsys, "--state", str(state), "diff", "1", "2", "--json")
    assert code == 0 and not OBEYED.search(out)
    new = [t for t in json.loads(out)["transitions"] if t["transition"] == "new_crash"]
    assert [t["after"]["signature"] for t in new] == [HOSTILE]          # escaped by json.dumps, read back exactly


def test_a_refusal_quoting_a_hostile_path_prints_it_escaped(tmp_path: Path, capsys) -> None:
    trap = tmp_path / "lock\x1b[2J\r\x07"
    trap.write_text("")
    code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), "zoo", "lock", "--lock-dir", str(trap))
    assert code == 2 and "lock\\x1b[2J\\x0d\\x07 is a file" in err and not OBEYED.search(err), err


def test_nothing_in_bot_cli_writes_to_the_terminal_but_its_one_writer() -> None:
    """print(), sys.stdout / sys.stderr and argparse's own printers are say.py's alone."""
    found = []
    for path in sorted((PROJECT_ROOT / "bot" / "cli").glob("*.py")):
        if path.name == "say.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{path.name}:{node.lineno} print()")
            elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr", "print_help", "print_usage"):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert not found, found


def test_a_service_line_quoting_a_hostile_host_prints_it_escaped(tmp_path: Path, capsys) -> None:
    """`flagsweep serve`'s own lines (bot.service.daemon) quote the settings file and the OS's errors: a host that
    cannot be resolved, holding a clear-screen sequence, a carriage return and a bell, is shown, not obeyed."""
    from bot.service.daemon import serve
    from bot.settings import Settings, WebhookSettings

    s = Settings(state_path=tmp_path / "s.sqlite",
                 webhook=WebhookSettings(host="no-such-host\x1b[2J\r\x07", secret="s"))
    assert serve(s, schedule=False) == 2
    err = capsys.readouterr().err
    assert err.startswith("flagsweep serve: cannot listen on no-such-host\\x1b[2J\\x0d\\x07:8080") and \
        not OBEYED.search(err), err
