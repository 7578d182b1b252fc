"""Run a standalone reproducer in a fresh, isolated interpreter and read how it ended as a `ScriptResult`.

Scripts are rendered elsewhere (bot/verify/script.py, from what a run stored);
this module only runs one, under whichever interpreter it is given (the run's
own, so a crash that exists only in a nightly is checked on that nightly).
asv's rule: the child writes one versioned result line per mode it ran
(`FLAGSWEEP_RESULT {"v": 1, ...}`, templates/repro_script.py.j2 and
maintainer_driver.py.j2), and every way it can end maps to one of STATUSES.
Stdlib only: it never imports torch.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from harness.core.record import RecordError, check_closed, check_version, parse
from harness.engine.childline import ChildLineError, tagged

RESULT_TAG = "FLAGSWEEP_RESULT"
VERSION = 1                   # of the result line; the templates write it, `read_lines` checks it
RAN = ("ok", "error")         # the script's own statuses: it ran and said so
ENDED = ("timeout", "killed")  # it hung past the timeout / it ended without a line
BAD_OUTPUT = "bad_output"     # it printed a result line this flagsweep cannot read (another version, a typo)
NOT_STARTED = "not_started"   # the interpreter could not be started
STATUSES = RAN + ENDED + (BAD_OUTPUT, NOT_STARTED)


@dataclass(frozen=True)
class ResultLine:
    """One FLAGSWEEP_RESULT line as a script writes it (version 1): the strict reader's shape."""

    status: str                       # ok | error
    mode: str | None = None           # eager | baseline | flag, or the driver's eager | None | False | True
    graphs: int | None = None
    signature: str | None = None
    error_type: str | None = None
    exception: str | None = None      # the innermost exception's class, when it failed
    torch_version: str | None = None
    torch_git: str | None = None
    parameters: int | None = None     # of the model (the reproducer only)
    seconds: float | None = None      # build, compile and run


@dataclass(frozen=True)
class ScriptResult:
    """How one run of a script ended: its (last) line's fields, or why there is no line; each mode's own result."""

    status: str                       # one of STATUSES
    mode: str | None = None
    graphs: int | None = None
    signature: str | None = None
    error_type: str | None = None
    exception: str | None = None
    torch_version: str | None = None
    torch_git: str | None = None
    parameters: int | None = None
    seconds: float | None = None
    returncode: int | None = None     # None: it did not exit (a timeout, not started)
    error: str | None = None          # why there is no readable line (bad_output, not_started)
    stderr_tail: str = ""             # the end of its stderr when it ended without a line
    modes: Mapping[str, "ScriptResult"] = field(default_factory=dict)   # {mode: its line} when it reported several

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"status": STATUSES}

    def __post_init__(self) -> None:
        check_closed(self, "script result")

    @property
    def reported(self) -> bool:
        """The script gave an answer: its line, a hang or a death (not: it could not start, or its line is unreadable)."""
        return self.status not in (BAD_OUTPUT, NOT_STARTED)

    @property
    def said(self) -> str | None:
        """Its signature, else its status when it reported (what a stage or a dynamic run records)."""
        return self.signature or (self.status if self.reported else None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (`flagsweep zoo repro --run` prints it)."""
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, line: ResultLine, **more: Any) -> "ScriptResult":
        """A result from a line the script printed, with what the runner knows besides."""
        return cls(**dataclasses.asdict(line), **more)

    @classmethod
    def not_run(cls, why: str | None = None) -> "ScriptResult":
        """Nothing ran: the interpreter could not start (or no check was left time to start)."""
        return cls(NOT_STARTED, error=why)


def read_lines(stdout: str) -> list[ResultLine]:
    """The result lines a script printed, in order; RecordError (or ChildLineError) naming what is wrong."""
    lines = []
    for data in tagged(stdout, RESULT_TAG):
        line = parse(ResultLine, check_version(data, VERSION, RESULT_TAG), RESULT_TAG)
        if line.status not in RAN:
            raise RecordError(f"{RESULT_TAG}: status {line.status!r}, expected one of {RAN}")
        lines.append(line)
    return lines


def run_script(text: str, python: str = sys.executable, timeout: float = 300, args: Sequence[str] = (),
               files: Mapping[str, str] | None = None, name: str = "repro.py") -> ScriptResult:
    """Run a reproducer's source (with command-line `args`) in a fresh isolated interpreter in an empty dir.

    files: other files written beside it first, {file name: text}; name: the script's own file name (a driver,
    drive.py, runs the maintainer's repro.py written beside it). The result is the script's last line, with
    `modes` when it reported several; a script that hangs is `timeout` (with the modes it reported before),
    one that ends without a line `killed`, an unreadable line `bad_output`, an interpreter that cannot start
    `not_started`.
    """
    with tempfile.TemporaryDirectory(prefix="flagsweep-repro-") as tmp:
        for other, content in (files or {}).items():
            (Path(tmp) / Path(other).name).write_text(content)
        path = Path(tmp) / Path(name).name
        path.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["HF_HUB_OFFLINE"] = "1"
        try:
            proc = subprocess.Popen([python, "-I", str(path), *args], cwd=tmp, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env)
        except OSError as exc:
            return ScriptResult.not_run(f"cannot run {Path(python).name}: {exc.strerror or exc}")
        out, err = _Reader(proc.stdout, whole=OUTPUT_CAP), _Reader(proc.stderr, whole=0)
        try:
            returncode: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:   # what it reported before it hung is kept (its modes)
            proc.kill()
            proc.wait()
            returncode = None
        stdout, stderr = out.text(), err.text()
    return _ended(stdout, "" if returncode is None else stderr, returncode, timed_out=returncode is None)


OUTPUT_CAP = 8 << 20            # bytes of a script's stdout kept whole; past it, only its result lines
_LINE_CAP = 1 << 20             # the longest line read at once (a longer one is read in pieces)
_TAIL = 64 << 10                # bytes of stderr kept, the last ones


class _Reader:
    """A child's pipe read on a thread in bounded memory (a reproducer printing a gigabyte must not take the bot's
    memory with it): the first `whole` bytes whole, then only the lines that carry a result, and the last _TAIL."""

    def __init__(self, pipe: Any, whole: int) -> None:
        self.whole, self.head, self.results, self.size = whole, bytearray(), [], 0
        self.tail: collections.deque[bytes] = collections.deque()   # the last lines, about _TAIL bytes (stderr)
        self.tail_size = 0
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe: Any) -> None:
        prefix = f"{RESULT_TAG} ".encode()
        with pipe:
            while line := pipe.readline(_LINE_CAP):
                self.size += len(line)
                if self.size <= self.whole:
                    self.head += line
                elif line.startswith(prefix) and len(self.results) < 1000:
                    self.results.append(line)
                if self.whole == 0:
                    self._keep_tail(line)

    def _keep_tail(self, line: bytes) -> None:
        """Keep the last _TAIL bytes by whole lines, dropping the oldest: no 64 KiB copy of the tail per line (26 s per
        million short lines; bench/script_output.py)."""
        self.tail.append(line)
        self.tail_size += len(line)
        while len(self.tail) > 1 and self.tail_size - len(self.tail[0]) >= _TAIL:
            self.tail_size -= len(self.tail.popleft())

    def text(self) -> str:
        """What was kept, decoded: all of it when it fit, else its result lines (stderr: its tail)."""
        self.thread.join()
        if self.whole == 0:
            return b"".join(self.tail)[-_TAIL:].decode(errors="replace")
        kept = bytes(self.head) if self.size <= self.whole else b"".join(self.results)
        return kept.decode(errors="replace")


def _ended(stdout: str, stderr: str, returncode: int | None, *, timed_out: bool) -> ScriptResult:
    """The result of a child that ran: its lines read strictly, and how it ended."""
    try:
        lines = read_lines(stdout)
    except (ChildLineError, RecordError) as exc:
        return ScriptResult(BAD_OUTPUT, returncode=returncode, error=str(exc), stderr_tail=stderr[-2000:])
    modes = {one.mode or "": ScriptResult.of(one) for one in lines} if len(lines) > 1 or timed_out and lines else {}
    if timed_out:
        return ScriptResult("timeout", modes=modes)
    if lines:
        return ScriptResult.of(lines[-1], returncode=returncode, modes=modes)
    return ScriptResult("killed", returncode=returncode, stderr_tail=stderr[-2000:])
