"""The model zoo: enumerate transformers model classes, build them tiny and offline, with inputs.

Public API (see ARCHITECTURE.md): Candidate, candidates, resolve, sample, build,
Built, BuildError, fingerprint, register, UnknownModel.
"""
from __future__ import annotations

from harness.zoo.build import BuildError, Built, build, fingerprint
from harness.zoo.enumerate import Candidate
from harness.zoo.registry import register
from harness.zoo.select import UnknownModel, candidates, resolve, sample

__all__ = ["Candidate", "candidates", "resolve", "sample", "build", "Built", "BuildError", "fingerprint", "register", "UnknownModel"]
