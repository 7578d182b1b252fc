"""The CLI parser builds and every subcommand module registers without importing torch."""
import subprocess
import sys


def test_help_does_not_import_torch():
    code = "import sys; from bot.cli.main import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_store_command_reports_a_foreign_state_file_and_leaves_it(tmp_path):
    """sweep, publish, nightly and runs all stop with exit 2 and a clear line, never a traceback or a reset."""
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 10)
    for args in (["sweep", "--models", "GPT2Model"], ["publish"], ["nightly", "--dry-run", "--torch", "current"],
                 ["runs", "list"], ["diff"]):
        out = subprocess.run([sys.executable, "-m", "bot.cli.main", "--state", str(bad), *args],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (args, out.stderr)
        assert "not a flagsweep state file" in out.stderr and "Traceback" not in out.stderr, args
    assert bad.read_bytes() == b"not a database at all" * 10
