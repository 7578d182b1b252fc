"""The model zoo: every transformers model class, built tiny and offline from the locked corpus, with inputs.

Public API (see ARCHITECTURE.md): Candidate, candidates, resolve, sample, build, prepare,
Built, BuildError, fingerprint, register, UnknownModel, LockError, CorruptEntry,
cannot_run (what an entry's modes record says of a mode), and zoo_code_version() (the run environment's recipe
fingerprint). Sweeps only
read the lock (harness/zoo/lock/); `flagsweep zoo lock` is the one writer.
"""
from __future__ import annotations

from harness.zoo.build import Built, build, fingerprint, prepare
from harness.zoo.errors import BuildError, CorruptEntry, LockError, UnknownModel
from harness.zoo.fingerprint import zoo_code_version
from harness.zoo.mode_record import cannot_run
from harness.zoo.registry import register
from harness.zoo.select import Candidate, candidates, resolve, sample

__all__ = ["Candidate", "candidates", "resolve", "sample", "build", "prepare", "Built", "BuildError", "fingerprint",
           "register", "UnknownModel", "LockError", "CorruptEntry", "cannot_run", "zoo_code_version"]
