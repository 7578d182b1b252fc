"""A run's environment: what was installed where the models ran, and which of it makes two runs comparable.

Writers: the workers' interpreter (harness.engine.environment.gather, sent to the parent), plus what the provider
knows of a build beyond it (`with_build`); a nightly that never started writes `failed` (the same fields, mostly
empty). One stored form: state.runs keeps `to_dict()` (its hash is the environment's key) and reads it back with
`from_dict`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from harness.core.record import parse

# The fields that make two runs incomparable (a resume in another environment is refused) when they differ.
COMPARABLE = ("torch_version", "torch_git", "transformers_version", "python_version", "device", "recipe_fingerprint")


@dataclass(frozen=True)
class RunEnvironment:
    """torch, transformers, Python and device of a run, and where its torch came from."""

    torch_version: str | None = None
    torch_git: str | None = None
    transformers_version: str | None = None
    python_version: str | None = None
    device: str | None = None
    cuda_version: str | None = None
    flagsweep_version: str | None = None
    recipe_fingerprint: str | None = None
    python: str | None = None            # the interpreter the workers ran (what a reproducer is verified under)
    platform: str | None = None
    device_name: str | None = None
    torch_index: str | None = None       # the wheel index the build came from (a nightly)
    torch_channel: str | None = None     # its channel (nightly, test, ...)

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-ready); a field never set is left out, as the stored forms before it did."""
        return {k: v for k, v in asdict(self).items() if k in _ALWAYS or v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunEnvironment":
        """Read the stored form; RecordError naming an unknown field."""
        return parse(cls, data, "run environment")

    def with_build(self, index: str | None, channel: str | None) -> "RunEnvironment":
        """This environment with the provider's knowledge of where the build came from."""
        return replace(self, torch_index=index, torch_channel=channel)

    def differences(self, other: "RunEnvironment") -> list[str]:
        """`field: old -> new` for each comparable field that differs."""
        return [f"{k}: {getattr(self, k)} -> {getattr(other, k)}" for k in COMPARABLE
                if getattr(self, k) != getattr(other, k)]

    @classmethod
    def failed(cls, version: str | None, git: str | None, index: str | None, channel: str | None) -> "RunEnvironment":
        """The environment of a nightly that could not start: only what the provider knew of its build."""
        return cls(torch_version=version, torch_git=git, torch_index=index, torch_channel=channel)


# Fields every stored form has had (the interpreter's gather always wrote them, null or not).
_ALWAYS = ("torch_version", "torch_git", "transformers_version", "python_version", "device", "cuda_version",
           "flagsweep_version", "recipe_fingerprint")
