"""A run's environment: what was installed where the models ran, and which of it makes two runs comparable.

Writers: the workers' interpreter (harness.engine.environment.gather, sent to the parent), plus what the provider
knows of a build beyond it (`with_build`); a nightly that never started writes `failed` (the same fields, mostly
empty). One stored form: state.runs keeps `to_dict()` (its hash is the environment's key) and reads it back with
`from_dict`.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping

from harness.core.record import RecordError, parse

# The fields that make two runs incomparable (a resume in another environment is refused) when they differ.
COMPARABLE = ("torch_version", "torch_git", "transformers_version", "python_version", "device", "recipe_fingerprint")
# The kinds of device a run may name, each alone or with an index ("cuda:1"), as `--device` takes them.
DEVICE_KINDS = ("cpu", "cuda", "mps", "xpu")
_DEVICE = re.compile(r"(?P<kind>[a-z]+)(:\d+)?\Z")


def device_kind(device: Any) -> str:
    """The kind of a device name ("cuda:1" -> "cuda"); RecordError when it is none of DEVICE_KINDS."""
    found = _DEVICE.match(device) if isinstance(device, str) else None
    if found is None or found.group("kind") not in DEVICE_KINDS:
        raise RecordError(f"device {device!r} is not one of {', '.join(DEVICE_KINDS)} (optionally :N)")
    return found.group("kind")


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
    # On a CUDA device only (gathered in a worker): what the GPU is and what drives it. Unset on a CPU run, so a CPU
    # run's stored form is what it was before these fields existed.
    compute_capability: str | None = None   # "9.0"
    driver_version: str | None = None       # the NVIDIA driver, as nvidia-smi says it ("550.54.15")
    # Whether a provider said where the build came from: its index and channel are then stored, null or not (a plain
    # sweep's never had them). Kept so a stored form reads back to the same bytes, and so the same key.
    provided: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "provided" and not isinstance(value, (str, type(None))):
                raise RecordError(f"run environment: {f.name} {value!r} is not a string")
        if self.device is not None:
            try:
                device_kind(self.device)
            except RecordError as exc:
                raise RecordError(f"run environment: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-ready); a field never set is left out, as the stored forms before it did."""
        data = asdict(self)
        provided = data.pop("provided")
        return {k: v for k, v in data.items() if k in _ALWAYS or v is not None or (provided and k in _BUILD)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunEnvironment":
        """Read the stored form; RecordError naming an unknown field."""
        if isinstance(data, Mapping) and "provided" in data:     # not a stored key: the keys' presence says it
            raise RecordError("run environment: unknown field 'provided'")
        return replace(parse(cls, data, "run environment"), provided=any(k in data for k in _BUILD))

    def with_build(self, origin: "BuildOrigin") -> "RunEnvironment":
        """This environment with the provider's knowledge of where the build came from."""
        return replace(self, torch_index=origin.index, torch_channel=origin.channel, provided=True)

    def differences(self, other: "RunEnvironment") -> list[str]:
        """`field: old -> new` for each comparable field that differs."""
        return [f"{k}: {getattr(self, k)} -> {getattr(other, k)}" for k in COMPARABLE
                if getattr(self, k) != getattr(other, k)]

    @classmethod
    def failed(cls, version: str | None, git: str | None, index: str | None, channel: str | None) -> "RunEnvironment":
        """The environment of a nightly that could not start: only what the provider knew of its build."""
        return cls(torch_version=version, torch_git=git, torch_index=index, torch_channel=channel, provided=True)


@dataclass(frozen=True)
class BuildOrigin:
    """Where a provided build came from (bot.builds.provider.Nightly.origin): what `with_build` adds."""

    index: str | None      # the PEP 503 index (None: not installed by us)
    channel: str | None    # the channel on it


# Fields every stored form has had (the interpreter's gather always wrote them, null or not).
_ALWAYS = ("torch_version", "torch_git", "transformers_version", "python_version", "device", "cuda_version",
           "flagsweep_version", "recipe_fingerprint")
_BUILD = ("torch_index", "torch_channel")
