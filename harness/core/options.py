"""How to run sweep items (not what to run): the one options object, from the settings down to the pool; and
what a run stored of them (`RunOptions`)."""
from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Mapping

from harness.core.modes import DEFAULT as DEFAULT_MODE, Mode
from harness.core.outcome import BACKENDS
from harness.core.record import RecordError, parse
from harness.core.run_environment import device_kind


# Tolerances that keep the embedded corpus at zero false `wrong` under the baseline (measured: bench/accuracy_cost.py).
# transformers takes other code paths while traced (is_torchdynamo_compiling()), so under backend `eager` outputs
# already differ by 1e-7 to 1e-3; anything beyond these is then arbitrated against an fp64 reference.
RTOL = 1e-3
ATOL = 1e-3


@dataclass(frozen=True)
class Accuracy:
    """The accuracy oracle's settings ([accuracy]): whether the later calls and eager references run, and the
    tolerances within which a compiled output is `close` to eager's."""

    enabled: bool = True
    rtol: float = RTOL
    atol: float = ATOL
    # Later calls answered from the baseline where they cannot differ (harness.engine.flags.answering), and the
    # share of answered items the nightly audit traces again in full (at least answer_audit_min, seeded by the night).
    answer: bool = True
    answer_audit: float = 0.05
    answer_audit_min: int = 2
    # Nights after a disagreement that the rule stays off for the config the audit found answered wrong.
    answer_quarantine: int = 7

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Accuracy":
        """Read the stored form (a run's options.accuracy); RecordError naming an unknown field or a bad value."""
        found = parse(cls, data, "accuracy options")
        _check(found, "accuracy options", {"enabled": _flag, "rtol": _tolerance, "atol": _tolerance, "answer": _flag,
                                           "answer_audit": lambda v: _number(v) and 0 <= v <= 1,
                                           "answer_audit_min": _count(0), "answer_quarantine": _count(0)})
        return found


@dataclass
class SweepOptions:
    """How to run items (not what to run)."""

    workers: int = 0                  # 0: one per core
    timeout: float = 300.0            # seconds per item (the build counts toward the first)
    backend: str = "count"            # count | eager | aot_eager | inductor
    device: str = "cpu"
    python: str | None = None         # interpreter for the workers (a nightly's venv)
    max_items_per_worker: int = 50    # recycle a worker after this many items
    max_rss_mb: float = 6000.0        # recycle above this; kill the item above 1.5x
    extra_modules: list[str] = field(default_factory=list)  # imported by each worker at start
    # The calls after the first, judged against eager. Off unless asked: the bot asks through its settings
    # ([accuracy], on by default: Settings.sweep_options); a bare engine call (zoo check, a job, a bench) judges nothing.
    accuracy: Accuracy = field(default_factory=lambda: Accuracy(enabled=False))
    gpu_workers: int = 2              # on a CUDA device: workers per GPU, each capped at 1/gpu_workers of its memory
    # Inductor's and AOTAutograd's cache root, shared by every worker; one folder per torch build below it.
    # None or "": no shared cache (each worker compiles everything itself).
    compile_cache: str | None = None
    # How each item runs beside its flags (harness.core.modes): one mode a run; the default (eval) is left out of
    # the stored form, so a run of it is stored exactly as before modes existed (and every older run is eval).
    mode: Mode = DEFAULT_MODE

    @property
    def shared_cache(self) -> str | None:
        """The cache root the workers compile into: only the inductor backend compiles through Inductor and
        AOTAutograd, so a count, eager or aot_eager sweep never touches `compile_cache` (None)."""
        return self.compile_cache or None if self.backend == "inductor" else None

    @property
    def on_cuda(self) -> bool:
        """The workers run the models on a CUDA device."""
        return self.device.startswith("cuda")

    def worker_count(self, items: int | None = None, gpus: int = 1) -> int:
        """Workers to start for `items` groups: the setting (0: one per core), or on CUDA `gpu_workers` per GPU;
        never more than the groups."""
        n = self.gpu_workers * max(1, gpus) if self.on_cuda else self.workers or os.cpu_count() or 1
        return max(1, min(n, items) if items else n)

    def to_dict(self) -> dict[str, Any]:
        """What is stored with a run (the mode only where it is not the default)."""
        found = asdict(self)
        if self.mode.is_default:
            del found["mode"]
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SweepOptions":
        """Read the stored form (`to_dict`'s, as a shard's export carries it); RecordError naming an unknown field or
        a value out of its range."""
        if isinstance(data, Mapping) and "accuracy" in data:
            data = {**data, "accuracy": Accuracy.from_dict(data["accuracy"])}
        if isinstance(data, Mapping) and "mode" in data:
            data = {**data, "mode": Mode.from_dict(data["mode"])}
        found = parse(cls, data, "sweep options")
        _check(found, "sweep options", _RANGES)
        return found


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z", re.ASCII)


def _count(least: int) -> Any:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _flag(v: Any) -> bool:
    return isinstance(v, bool)


def _tolerance(v: Any) -> bool:
    return _number(v) and v >= 0


def _device(v: Any) -> bool:
    try:
        device_kind(v)
    except RecordError:
        return False
    return True


def _text_or_none(v: Any) -> bool:
    return v is None or isinstance(v, str)


# Each stored option's range (what `SweepOptions.from_dict` accepts).
_RANGES = {
    "workers": _count(0), "timeout": lambda v: _number(v) and v > 0, "backend": lambda v: v in BACKENDS,
    "device": _device, "python": _text_or_none, "max_items_per_worker": _count(1),
    "max_rss_mb": lambda v: _number(v) and v > 0, "gpu_workers": _count(1), "compile_cache": _text_or_none,
    "extra_modules": lambda v: isinstance(v, list) and all(isinstance(m, str) and _MODULE.match(m) for m in v),
    "accuracy": lambda v: isinstance(v, Accuracy), "mode": lambda v: isinstance(v, Mode),
}


def _check(record: Any, what: str, ranges: dict[str, Any]) -> None:
    """RecordError naming the first field whose value `ranges` refuses."""
    for f in fields(record):
        value = getattr(record, f.name)
        if not ranges[f.name](value):
            raise RecordError(f"{what}: {f.name} {value!r} is out of range")


# The keys a run stores beside SweepOptions' fields, each with its one writer: the population drawn
# (harness.engine.engine), the configs set aside (state.runs.create_run), the export a run was imported from
# (state.runs.import_run), the shards a merged run holds and those it lacks (bot.pipeline.merge).
_POPULATION = ("population", "source", "seed", "candidates", "size", "sample", "strata")


@dataclass(frozen=True)
class RunOptions:
    """A stored run's options, read by every reader through this one record: how its items ran (`sweep`, the
    engine's SweepOptions) and what was kept beside them. Stored flat (SweepOptions' fields and the extras set);
    runs stored before a field existed were given it once (store v20)."""

    sweep: SweepOptions = field(default_factory=SweepOptions)
    population: dict[str, Any] | None = None     # how the models were drawn: {population, source, seed, ...}
    unavailable_configs: dict[str, dict[str, Any]] = field(default_factory=dict)   # name -> {settings, missing}
    imported_from: str | None = None             # the export file's hash (an imported shard)
    merged_from: list[int] | None = None         # the shard runs a merged run holds
    missing_shards: list[str] | None = None      # the shards a partial merge lacks ("2/4")

    EXTRAS: ClassVar[tuple[str, ...]] = ("population", "unavailable_configs", "imported_from", "merged_from",
                                         "missing_shards")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunOptions":
        """Read the stored flat form; RecordError naming an unknown field or a value out of its range."""
        if not isinstance(data, Mapping):
            raise RecordError(f"run options: expected an object, got {type(data).__name__}")
        sweep = SweepOptions.from_dict({k: v for k, v in data.items() if k not in cls.EXTRAS})
        found = parse(cls, {"sweep": sweep, **{k: v for k, v in data.items() if k in cls.EXTRAS}}, "run options")
        for name in cls.EXTRAS:
            value = getattr(found, name)
            if not _EXTRA_RANGES[name](value):
                raise RecordError(f"run options: {name}: expected {_EXTRA_SHAPES[name]}")
        return found

    def to_dict(self) -> dict[str, Any]:
        """The stored flat form: SweepOptions' fields, and each extra that is set."""
        extras = {name: getattr(self, name) for name in self.EXTRAS}
        return {**self.sweep.to_dict(), **{k: v for k, v in extras.items() if v not in (None, {}, [])}}


def _unavailable(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(u, dict) and set(u) == {"settings", "missing"} for u in v.values())


def _list_of(kind: type) -> Any:
    return lambda v: v is None or (isinstance(v, list) and all(isinstance(x, kind) and not isinstance(x, bool)
                                                                for x in v))


_EXTRA_RANGES = {
    "population": lambda v: v is None or (isinstance(v, dict) and set(v) <= set(_POPULATION)),
    "unavailable_configs": _unavailable, "imported_from": _text_or_none, "merged_from": _list_of(int),
    "missing_shards": _list_of(str),
}
_EXTRA_SHAPES = {
    "population": f"an object of {', '.join(_POPULATION)}", "unavailable_configs": "{name: {settings, missing}}",
    "imported_from": "a string", "merged_from": "a list of run ids", "missing_shards": "a list of shard labels",
}
