"""A mode: how a model runs while it is compiled, beside the flags (the axes real bugs ride on).

A mode is a named tuple of four closed axes: the phase (`eval`, or `train`: a loss and its backward compiled), the
dtype (`float32`, or `bfloat16` / `float16` as CPU or CUDA autocast), dynamic (`default`; `true`, as
`torch.compile(dynamic=True)`; `marked`, batch and sequence marked with `maybe_mark_dynamic`) and the attention
implementation (the entry's `default`, `eager`, `sdpa`). `eval` is every axis at its default: today's items, stored
and compared exactly as before modes existed. A mode's name is its label; two modes are the same mode when their
axes are. Named modes come from the settings' `[modes.NAME]` tables beside the built-in ones (`BUILTIN`).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Mapping

from harness.core.record import RecordError, check_closed, parse

PHASES = ("eval", "train")
DTYPES = ("float32", "bfloat16", "float16")
DYNAMICS = ("default", "true", "marked")
ATTENTIONS = ("default", "eager", "sdpa")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z", re.ASCII)
AXES = ("phase", "dtype", "dynamic", "attention")


@dataclass(frozen=True)
class Mode:
    """One mode: its name and its four axes."""

    name: str = "eval"
    phase: str = "eval"
    dtype: str = "float32"
    dynamic: str = "default"
    attention: str = "default"

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"phase": PHASES, "dtype": DTYPES, "dynamic": DYNAMICS,
                                                     "attention": ATTENTIONS}

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise RecordError(f"mode: name {self.name!r} is not a name (letters, digits, '_', '-', '.')")
        check_closed(self, f"mode {self.name}")

    @property
    def axes(self) -> tuple[str, str, str, str]:
        """What the mode is, without its label."""
        return (self.phase, self.dtype, self.dynamic, self.attention)

    @property
    def is_default(self) -> bool:
        """Every axis at its default: an item of this mode is stored and keyed as before modes existed."""
        return self.axes == DEFAULT.axes

    @property
    def train(self) -> bool:
        return self.phase == "train"

    def compiles_under(self, backend: str) -> str:
        """The backend a sweep's compile under `backend` amounts to in this mode: in train the worker hands each graph
        to AOTAutograd so that the backward is compiled (harness.engine.backend), which under `count` and `eager`
        (nothing compiled after Dynamo) is what `aot_eager` does. A reproducer of the run compiles under this one."""
        return "aot_eager" if self.train and backend in ("count", "eager") else backend

    @property
    def half(self) -> bool:
        """Autocast to a half-precision dtype."""
        return self.dtype != "float32"

    @property
    def key(self) -> str:
        """What keys the mode's issues, history and verdicts: '' for the default (keyed as before modes existed), else
        its changed axes (`phase=train,dtype=bfloat16`): a mode renamed in the settings keeps its issues."""
        return ",".join(f"{axis}={value}" for axis, value in self.changed().items())

    def changed(self) -> dict[str, str]:
        """The axes not at their default, in order ({} for the default mode)."""
        return {axis: getattr(self, axis) for axis in AXES if getattr(self, axis) != getattr(DEFAULT, axis)}

    def to_dict(self) -> dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Mode":
        """Read the stored form; RecordError naming an unknown field or a value outside its axis."""
        return parse(cls, data, "mode")


DEFAULT = Mode()

# The accuracy tolerances of a mode (PyTorch's benchmark harness: 1e-2 for training and for amp): its oracle's
# (harness.engine.step_oracle) and its accuracy reproducer's (bot/verify/wrong_script.py).
TRAIN_TOL = 1e-2
HALF_TOL = 1e-2


def tolerance(mode: Mode, rtol: float) -> float:
    """The rtol and atol a mode's results are compared at: the run's rtol, widened in train and in half precision."""
    return max(rtol, TRAIN_TOL if mode.train else 0.0, HALF_TOL if mode.half else 0.0)

# The modes every settings file knows by name (the sweeps: training, half precision, dynamic, attention).
BUILTIN: dict[str, Mode] = {m.name: m for m in (
    DEFAULT,
    Mode("train", phase="train"),
    Mode("bf16", dtype="bfloat16"),
    Mode("fp16", dtype="float16"),
    Mode("train-bf16", phase="train", dtype="bfloat16"),
    Mode("dynamic-true", dynamic="true"),
    Mode("dynamic-marked", dynamic="marked"),
    Mode("sdpa", attention="sdpa"),
    Mode("eager-attention", attention="eager"),
)}


class ModeError(ValueError):
    """A mode named that no table defines, or a `[modes.NAME]` table that is not a mode (one line)."""


def named(tables: Mapping[str, Any], where: str = "modes") -> dict[str, Mode]:
    """The built-in modes and those of a settings file's `[modes.NAME]` tables (each axis optional, default as
    `eval`); ModeError naming the first bad table, or one that redefines a built-in name."""
    found = dict(BUILTIN)
    for name, table in tables.items():
        if name in BUILTIN:
            raise ModeError(f"{where}.{name}: {name!r} is a built-in mode ({_describe(BUILTIN[name])}); "
                            "choose another name")
        if not isinstance(table, Mapping):
            raise ModeError(f"{where}.{name}: expected a table of {', '.join(AXES)}")
        try:
            found[name] = parse(Mode, {**table, "name": name}, f"{where}.{name}")
        except RecordError as exc:
            raise ModeError(str(exc)) from None
    return found


def resolve(names: list[str], known: Mapping[str, Mode]) -> list[Mode]:
    """The modes `names` asks for, in order, each once; ModeError naming the first unknown one, or two names of one
    mode (their items would be the same items twice)."""
    if not names:
        raise ModeError("no mode named (eval is today's: model.eval(), float32, forward only)")
    out: list[Mode] = []
    for name in names:
        if name not in known:
            raise ModeError(f"unknown mode {name!r} (known: {', '.join(sorted(known))})")
        mode = known[name]
        same = next((m for m in out if m.axes == mode.axes), None)
        if same is not None:
            raise ModeError(f"modes {same.name!r} and {name!r} are the same mode")
        out.append(mode)
    return out


def _describe(mode: Mode) -> str:
    changed = mode.changed()
    return ", ".join(f"{k} {v}" for k, v in changed.items()) or "every axis at its default"
