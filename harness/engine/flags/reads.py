"""Runs in a worker: which config keys a compile reads, through any path torch offers, with the values read.

A flag that a model's baseline compile never reads cannot change that compile: tracing,
AOTAutograd and the backend are deterministic given the code, the inputs and the config
values they read (DESIGN "read-set pruning"). So the recorder must miss no read; it counts
a key as read when it is reached by
- attribute access on the config module or a nested group (`config.x`, `config.triton.x`),
- the module's `_config` table (`_config[k]`, `.get(k)`, iterating entries: `items()`, `values()`, `dict(...)`),
- a bulk export (`get_config_copy`, `save_config`, `get_hash`, `codegen_config`, ...: every exported key),
  except the copies Dynamo writes into its compile metrics log (LOGGING_EXPORTERS).
The reads are kept per call window (`windows`: DESIGN "Words"): `first`, the whole measured compile (tracing, the
backend and the first run, so keys read late by AOTAutograd or Inductor, and by modules imported lazily during the
compile, count too), then each later call's (its recompile, its run). Keys read only when torch was imported were
read before any flag was set: they cannot see a flag in a sweep either way.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any, Iterator

# Every config module a flag may live in (harness.engine.configs.CONFIG_MODULES plus functorch's).
RECORDED_MODULES = (
    "torch._dynamo.config",
    "torch._functorch.config",
    "torch._inductor.config",
    "torch.fx.experimental._config",
    "torch.compiler.config",
)


# Torch's own exporters whose copy of a whole config only goes into the compile's metrics log (Dynamo's
# record_compilation_metrics, once per compiled frame). They are not reads: counting them would mark every key
# read by every model. Any other bulk export counts every key it exports; the audit checks this exemption.
LOGGING_EXPORTERS = frozenset({
    "_get_dynamo_config_for_logging", "_scrubbed_inductor_config_for_logging",
    "_compiler_config_for_logging", "_functorch_config_for_logging",
})


def _for_logging(frame: Any) -> bool:
    """Is a bulk export (called from `frame`, within get_config_copy & co.) made for one of LOGGING_EXPORTERS?"""
    for _ in range(3):
        if frame is None:
            return False
        if frame.f_code.co_name in LOGGING_EXPORTERS and frame.f_globals.get("__name__") == "torch._dynamo.utils":
            return True
        frame = frame.f_back
    return False


class _Recorder:
    """The keys read while `active`, by full dotted name, with a JSON-safe value where one was seen."""

    def __init__(self) -> None:
        self.active = False
        self.reads: dict[str, Any] = {}

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        active, self.active = self.active, False
        try:
            yield
        finally:
            self.active = active

    def note(self, module: str, key: str, value: Any = None) -> None:
        if self.active:
            full = f"{module}.{key}"
            if full not in self.reads or self.reads[full] is None:
                self.reads[full] = _plain(value)

    def note_all(self, module: str, keys: Any) -> None:
        if self.active:
            for key in keys:
                self.reads.setdefault(f"{module}.{key}", None)


def _plain(value: Any) -> Any:
    """A value as JSON data: scalars as they are, anything else by repr (clipped)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]


class _RecordingTable(dict):
    """A config module's `_config` table that tells the recorder about every entry handed out."""

    __slots__ = ("_module", "_recorder")

    def __getitem__(self, key: str) -> Any:
        self._recorder.note(self._module, key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self:
            self._recorder.note(self._module, key)
        return super().get(key, default)

    def items(self) -> Any:
        self._recorder.note_all(self._module, super().keys())
        return super().items()

    def values(self) -> Any:
        self._recorder.note_all(self._module, super().keys())
        return super().values()

    def copy(self) -> dict:
        self._recorder.note_all(self._module, super().keys())
        return dict(super().items())

    def __iter__(self) -> Iterator[str]:   # defined, so dict(table) goes through keys() and __getitem__
        return super().__iter__()


_RECORDER = _Recorder()


def _install_module(name: str) -> None:
    module = importlib.import_module(name)
    table = module.__dict__["_config"]
    if isinstance(table, _RecordingTable):
        return
    recording = _RecordingTable(table)
    recording._module, recording._recorder = name, _RECORDER
    types.ModuleType.__setattr__(module, "_config", recording)   # past the config module's own __setattr__


def _install_class() -> None:
    """Wrap ConfigModule's reads once: attribute access (with its value) and bulk exports."""
    from torch.utils._config_module import ConfigModule

    if getattr(ConfigModule, "_flagsweep_recording", False):
        return
    plain_getattr, plain_get_dict = ConfigModule.__getattr__, ConfigModule._get_dict

    def __getattr__(self: Any, name: str) -> Any:
        value = plain_getattr(self, name)
        _RECORDER.note(self.__name__, name, value)
        return value

    def _get_dict(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if _for_logging(sys._getframe(1)):
            with _RECORDER.paused():
                return plain_get_dict(self, *args, **kwargs)
        exported = plain_get_dict(self, *args, **kwargs)
        _RECORDER.note_all(self.__name__, exported)
        return exported

    ConfigModule.__getattr__, ConfigModule._get_dict = __getattr__, _get_dict
    ConfigModule._flagsweep_recording = True


def install() -> None:
    """Hook every config module of this torch (those it lacks are skipped); idempotent."""
    _install_class()
    for name in RECORDED_MODULES:
        try:
            _install_module(name)
        except (ImportError, KeyError):
            continue


class Windows:
    """Read sets by call window: after `enter(name)`, the keys read land in that window's set."""

    def __init__(self) -> None:
        self.sets: dict[str, dict[str, Any]] = {}

    def enter(self, name: str) -> None:
        """The reads from now on are window `name`'s."""
        _RECORDER.reads = self.sets.setdefault(name, {})



def union(sets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every key read in any window, with a value where one was seen (the first)."""
    merged: dict[str, Any] = {}
    for found in sets.values():
        for key, value in found.items():
            if merged.get(key) is None:
                merged[key] = value
    return merged


@contextlib.contextmanager
def windows(first: str) -> Iterator[Windows]:
    """Within the block, every config key read lands in the current window's set (the first: `first`)."""
    install()
    found = Windows()
    found.enter(first)
    _RECORDER.active = True
    try:
        yield found
    finally:
        _RECORDER.active = False


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Any]]:
    """Within the block, every config key read lands in the yielded dict {full key: value read or None}."""
    install()
    _RECORDER.reads = reads = {}
    _RECORDER.active = True
    try:
        yield reads
    finally:
        _RECORDER.active = False
