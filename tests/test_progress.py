"""The progress bar (tqdm): a live bar on a terminal, sparse plain lines in logs, nothing when disabled."""
from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from harness.engine import progress
from harness.engine.progress import Progress

ROOT = Path(__file__).parents[1]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_tqdm_redraws_one_line_with_counts_and_crashes():
    term = Terminal()
    bar = Progress(3, enabled=True, label="sweep 3 models", stream=term)
    for crashed in (False, True, False):
        bar.advance(crashed=crashed)
    bar.close()
    out = term.getvalue()
    assert "\r" in out and out.endswith("\n")
    final = out.rstrip("\n").rsplit("\r", 1)[-1]
    assert final.startswith("sweep 3 models: 100%") and "3/3" in final and "1 crashed" in final


def test_in_a_log_it_writes_a_line_at_start_and_end_only(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(progress, "LOG_EVERY_S", 3600.0)
    bar = Progress(50, done=10, enabled=True, label="sweep", stream=log)   # a resumed sweep: 10 already done
    for _ in range(40):
        bar.advance()
    bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue()
    assert "10/50" in lines[0] and "50/50" in lines[1] and "0 crashed" in lines[1]


def test_disabled_or_empty_writes_nothing(capsys):
    for bar in (Progress(5, enabled=False), Progress(0, enabled=True)):
        bar.advance()
        bar.close()
    assert capsys.readouterr() == ("", "")


def test_default_stream_is_stderr(capsys):
    bar = Progress(1, enabled=True, label="x")
    bar.advance()
    bar.close()
    out, err = capsys.readouterr()
    assert out == "" and "1/1" in err


def test_importing_the_module_does_not_import_tqdm():
    # Worker processes import harness modules; the bar's library loads only when a bar is drawn.
    code = "import sys, harness.engine.progress; print('tqdm' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "False", res.stderr


HOSTILE = "Bert\x1b[2J\rModel\x07\u202e"
SHOWN = "Bert\\x1b[2J\\x0dModel\\x07\\u202e"
# Anything a terminal obeys but tqdm's own carriage returns: C0 but tab, newline and CR; DEL; C1; bidi controls.
OBEYED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_a_hostile_name_in_a_log_line_is_shown_not_obeyed():
    """A model or config name with a clear-screen sequence, a carriage return, a bell and a right-to-left override,
    in the label of a plain log line (harness.core.terminal.visible, the one rule)."""
    log = io.StringIO()
    bar = Progress(1, enabled=True, label=f"sweep {HOSTILE}", stream=log)
    bar.advance()
    bar.close()
    out = log.getvalue()
    assert SHOWN in out and "\r" not in out and not OBEYED.search(out), out


def test_a_hostile_name_on_a_terminal_is_shown_not_obeyed_in_the_label_and_the_verify_stage():
    """tqdm's live line: the label, and the verify bar's postfix (the model and stage it is on)."""
    from bot.verify.bar import StepBar

    term = Terminal()
    bar = Progress(1, enabled=True, label=HOSTILE, stream=term)
    bar.advance()
    bar.close()
    steps = StepBar(1, enabled=True, stream=term)
    steps.doing(f"{HOSTILE}: shrink")
    steps.finished()
    steps.close()
    out = term.getvalue()
    assert out.count(SHOWN) >= 2 and f"{SHOWN}: shrink" in out and not OBEYED.search(out), out
