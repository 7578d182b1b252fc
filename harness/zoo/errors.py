"""The zoo's errors: a build that failed, a name that matched nothing, a lock that cannot be used."""
from __future__ import annotations


class BuildError(Exception):
    """The model or its inputs could not be built; status is create_error or input_error."""

    def __init__(self, status: str, cause: str):
        super().__init__(f"{status}: {cause}")
        self.status = status
        self.cause = cause


class UnknownModel(ValueError):
    """A model name or pattern matched nothing; the message lists close matches."""


class LockError(UnknownModel):
    """The lock cannot answer for a model: no lock, another transformers version, no entry, or a bad entry."""


class CorruptEntry(LockError):
    """A lock entry that fails its checks (hash mismatch, a missing or mistyped field): named by model and field."""

    def __init__(self, model: str, field: str, why: str):
        super().__init__(f"lock entry {model!r} is corrupt: field {field!r}: {why}; "
                         f"re-lock it with `flagsweep zoo lock --models {model}`")
        self.model = model
        self.field = field
        self.why = why
