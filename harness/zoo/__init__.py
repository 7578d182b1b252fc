"""The model zoo: enumerate transformers model classes, build them tiny and offline, with inputs.

Public API (see ARCHITECTURE.md): Candidate, candidates, resolve, sample, build,
Built, BuildError, fingerprint, register, UnknownModel, and zoo_code_version()
(the hash of the zoo's build code and recipe data, for the run environment).
"""
from __future__ import annotations

from harness.zoo.build import BuildError, Built, build, fingerprint
from harness.zoo.enumerate import Candidate
from harness.zoo.fingerprint import zoo_code_version
from harness.zoo.registry import register
from harness.zoo.select import UnknownModel, candidates, resolve, sample

__all__ = ["Candidate", "candidates", "resolve", "sample", "build", "Built", "BuildError", "fingerprint", "register", "UnknownModel",
           "zoo_code_version"]
