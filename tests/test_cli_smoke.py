"""The CLI parser builds and every subcommand module registers without importing torch."""
import subprocess
import sys


def test_help_does_not_import_torch():
    code = "import sys; from bot.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
