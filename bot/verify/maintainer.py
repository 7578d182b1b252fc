"""The maintainer's script: the reproducer a person would write, rendered from a stored (shrunk) build.

`import torch, transformers`; the seed; the config class built in code from the
fields the build sets away from the class's defaults (bot/verify/overrides.py,
asked in the torch under test; sub-configs as dicts); the model class in eval
mode; each input written out on one line from its spec (harness/zoo/inputs.py
says what each kind means: literal tensors where values matter - image grids,
special-token prefixes, token types); one `torch.<module>.config.<name> = value`
line per setting; `torch.compile(model, backend=...)`; one forward under
`torch.no_grad()`, as the sweep runs it. No flagsweep code is inlined: values
differ from the sweep's draw, their shapes and meaning do not, and the oracle
(bot/verify/ablation.py) checks it fails the same way. Stdlib only.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from bot.text.render import render
from bot.text.scripts import Code, compose, dotted_name, python_literal, python_name
from harness.core.model_build import ModelBuild
from harness.core.modes import DEFAULT, Mode

WIDTH = 100            # a literal that fits on a line of this many columns stays on one line
BACKEND_OF = {"dynamo": "eager", "aot_autograd": "aot_eager", "inductor": "inductor"}
DTYPES = {"long": Code("torch.long"), "float": Code("torch.float32"), "bool": Code("torch.bool"),
          "int": Code("torch.int32")}
_PLAIN = ("torch._dynamo.config", "torch._inductor.config", "torch.compiler.config")   # reachable from `import torch`
IN_MODE = Path(harness.__file__).parent / "engine" / "in_mode.py"
MODE_PARTS = ("prepare", "labels", "loss", "compile", "mark", "step")   # templates/mode_lines.py.j2's


@dataclass(frozen=True)
class TrainRules:
    """How the sweep trains, as the scripts write it: the heads whose own loss takes `labels` as the `input_ids`, and
    the float attributes zeroed with dropout."""

    own_loss: tuple[str, ...]
    random_in_training: tuple[str, ...]


@functools.cache
def train_rules() -> TrainRules:
    """The rules as harness/engine/in_mode.py (the worker's step) holds them, read from its source: that module imports
    torch, which rendering never does, and a copy here could drift from it."""
    found = {}
    for node in ast.parse(IN_MODE.read_text(), str(IN_MODE)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return TrainRules(*(tuple(ast.literal_eval(found[name])) for name in ("OWN_LOSS", "RANDOM_IN_TRAINING")))


class SpecError(ValueError):
    """An input spec no script can write (an unknown kind or dtype, a shape that is not sizes)."""


def backend_for(component: str | None, run_backend: str) -> str:
    """The backend the script names: the component's ("eager" for Dynamo, by construction or isolated), else the run's."""
    if component in BACKEND_OF:
        return BACKEND_OF[component]
    return run_backend if run_backend in ("aot_eager", "inductor") else "eager"


def _is_name(key: Any) -> bool:
    try:
        python_name(key)
    except ValueError:
        return False
    return True


def argument_line(name: str, value: Any, pad: str) -> Code:
    """`name=value,` (`**{"name": value},` where the name is not a Python name)."""
    if _is_name(name):
        return compose("{}{}={},", Code(pad), python_name(name), python_literal(value))
    return compose("{}**{},", Code(pad), python_literal({name: value}))


def argument_lines(name: str, value: Any, indent: int) -> list[Code]:
    """`name=value,` on one line when it fits, else a dict's fields packed over several lines."""
    pad = " " * indent
    one = argument_line(name, value, pad)
    if len(one) <= WIDTH or not _is_name(name) or not (isinstance(value, dict) and value and all(_is_name(k) for k in value)):
        return [one]
    lines, current = [compose("{}{}=dict(", Code(pad), python_name(name))], Code(pad + "    ")
    for key, item in value.items():
        part = argument_line(key, item, "")
        if current.strip() and len(current) + 1 + len(part) > WIDTH:
            lines.append(Code(current.rstrip()))
            current = Code(pad + "    ")
        current = compose("{}{} ", current, part)
    return lines + [Code(current.rstrip()), compose("{}),", Code(pad))]


def _int(value: Any) -> Code:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(f"{value!r} is not an integer")
    return python_literal(value)


def _shape(shape: list[int]) -> Code:
    return Code("(" + ", ".join(_int(n) for n in shape) + ("," if len(shape) == 1 else "") + ")")


def _sizes(shape: list[int]) -> Code:
    return Code(", ".join(_int(n) for n in shape) or "()")


def _dtype(spec: dict[str, Any], default: str) -> Code:
    dtype = spec.get("dtype", default)
    if dtype not in DTYPES:
        raise SpecError(f"unknown dtype {dtype!r}")
    return DTYPES[dtype]


def _runs(prefix: list[list[Any]]) -> Code:
    """[[151652, 1], [151655, 4]] -> '[151652] + [151655] * 4'."""
    return Code(" + ".join(compose("[{}]", python_literal(v)) + (compose(" * {}", _int(n)) if n != 1 else "")
                           for v, n in prefix))


def _ids(spec: dict[str, Any]) -> Code:
    """Token ids: random in [low, high) above the ids to avoid (special tokens), after a literal prefix."""
    batch, length = spec["shape"]
    low, high = spec.get("low", 0), max(spec.get("low", 0) + 1, spec["high"])
    avoid = [a for a in spec.get("avoid", []) if low <= a < high]
    if avoid and max(avoid) + 1 < high - 1:
        low = max(avoid) + 1
    prefix = spec.get("prefix") or []
    tail = length - sum(n for _, n in prefix)
    rand = compose("torch.randint({}, {}, ({}, {}))", _int(low), _int(high), _int(batch), _int(tail))
    if not prefix:
        return rand
    return compose("torch.cat([torch.tensor([{}] * {}), {}], dim=1)", _runs(prefix), _int(batch), rand)


def _scaled(spec: dict[str, Any]) -> Code:
    scale = spec.get("scale", 1.0)
    randn = compose("torch.randn({})", _sizes(spec["shape"]))
    return randn if scale == 1.0 else compose("{} * {}", randn, python_literal(scale))


# One writer per input kind (harness/zoo/inputs.py says what each means); each value goes through a helper.
_KINDS = {
    "ids": _ids,
    "ones": lambda s: compose("torch.ones({}, dtype={})", _sizes(s["shape"]), _dtype(s, "long")),
    "zeros": lambda s: compose("torch.zeros({}, dtype={})", _sizes(s["shape"]), _dtype(s, "long")),
    "randn": _scaled,
    "rand": lambda s: compose("torch.rand({})", _sizes(s["shape"])),
    "randint": lambda s: compose("torch.randint({}, {}, {}, dtype={})", _int(s.get("low", 0)), _int(s["high"]),
                                 _shape(s["shape"]), _dtype(s, "long")),
    "tensor": lambda s: compose("torch.tensor({}, dtype={})", python_literal(s["value"]), _dtype(s, "long")),
    "arange": lambda s: compose("torch.arange({}, dtype={}).repeat({}, 1)", _int(s["shape"][1]), _dtype(s, "long"),
                                _int(s["shape"][0])),
    "typed": lambda s: compose("torch.tensor([{}] * {}, dtype={})",
                               _runs(s["prefix"] + [[0, s["shape"][1] - sum(n for _, n in s["prefix"])]]),
                               _int(s["shape"][0]), _dtype(s, "long")),
    # valid boxes (x0 <= x1, y0 <= y1); their values do not matter
    "bbox": lambda s: compose("torch.tensor([0, 0, {}, {}], dtype={}).repeat({}, 1)", _int(s.get("high", 1000) // 2),
                              _int(s.get("high", 1000) // 2), _dtype(s, "long"),
                              Code(", ".join(_int(n) for n in s["shape"][:-1]))),
    "value": lambda s: python_literal(s["value"]),
    "list": lambda s: Code("[" + ", ".join(input_expr(item) for item in s["items"]) + "]"),
}


def input_expr(spec: dict[str, Any]) -> Code:
    """One input of a spec (harness/zoo/inputs.py) as one Python expression; SpecError where it cannot be one."""
    writer = _KINDS.get(spec.get("kind")) if isinstance(spec, dict) else None
    if writer is None:
        raise SpecError(f"unknown input kind {spec.get('kind') if isinstance(spec, dict) else spec!r}")
    try:
        return writer(spec)
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"input spec {spec.get('kind')!r} does not read ({type(exc).__name__}: {exc})") from None


def input_lines(spec: dict[str, Any]) -> list[Code]:
    """Each input of a spec as `    name=expression,` (a name that is not a Python name: `**{...}`)."""
    return [argument_expr(name, input_expr(item)) for name, item in spec.items()]


def argument_expr(name: str, expr: Code) -> Code:
    """`    name=expr,` for an expression already written."""
    if _is_name(name):
        return compose("    {}={},", python_name(name), expr)
    return compose("    **{{{}: {}}},", python_literal(name), expr)


def setting_lines(settings: dict[str, Any]) -> tuple[list[Code], list[Code]]:
    """(import lines, assignment lines) for the settings: one `torch.<module>.config.<name> = value` each."""
    keys = [dotted_name(key) for key in settings]
    modules = sorted({key.rsplit(".config.", 1)[0] + ".config" for key in keys if ".config." in key} - set(_PLAIN))
    extra = sorted({k.split("._config.", 1)[0] + "._config" for k in keys if "._config." in k})
    imports = [compose("import {}", dotted_name(m)) for m in modules + extra]
    return imports, [compose("{} = {}", key, python_literal(value)) for key, value in zip(keys, settings.values())]


def mode_lines(part: str, mode: Mode, *, model: str = "", spec: dict[str, Any] | None = None, device: str = "cpu",
               run: Code = Code("compiled"), into: Code = Code(""), enabled: Code | None = None) -> list[Code]:
    """One part of how a script runs the model in `mode` (templates/mode_lines.py.j2: prepare, labels, loss, compile,
    mark, step), line by line for the script to indent; [] where the mode changes nothing there.

    model, spec: the model class and its inputs (whether the model's own loss takes labels); run: what the step calls;
    into: what takes the call's value out of train (`output = `, `return `); enabled: autocast's switch, an expression
    of the script.
    """
    if part not in MODE_PARTS:
        raise ValueError(f"no mode part {part!r}: one of {', '.join(MODE_PARTS)}")
    rules = train_rules()
    own_loss = model.endswith(rules.own_loss) and "input_ids" in (spec or {}) and "labels" not in (spec or {})
    text = render("mode_lines.py.j2", part=part, mode=mode, device=device, run=run, into=into, enabled=enabled,
                  own_loss=own_loss, random_words=list(rules.random_in_training))
    # the script template printed only what bot.text.scripts' helpers made: its lines are code as they stand
    return [Code(line) for line in text.splitlines()]


def render_script(built: ModelBuild, overrides: dict[str, Any], settings: dict[str, Any], backend: str,
                  signature: str, device: str = "cpu", mode: Mode = DEFAULT) -> str:
    """The maintainer's script for `built` (config fields `overrides`) under `settings`, compiled with `backend`.

    device: where the sweep ran (not cpu: one `torch.set_default_device` line puts the model and inputs there).
    mode: how the sweep ran the model; the template writes each axis not at its default as a person would (the
    attention implementation set, `model.train()` and a loss's backward, autocast, `dynamic=True` or marked inputs),
    in the lines `mode_lines` renders, which the accuracy reproducer (bot/verify/wrong_script.py) writes too.
    """
    imports, assignments = setting_lines(settings)
    config = [line for name, value in overrides.items() for line in argument_lines(name, value, 4)]
    inputs = input_lines(built.spec or {})
    lines = {part: mode_lines(part, mode, model=built.model, spec=built.spec, device=device)
             for part in ("prepare", "labels", "loss", "mark", "step")}
    return render("maintainer_script.py.j2", model=built.model, config_class=built.config_class,
                  seed=int(built.seed or 0), config_lines=config, input_lines=inputs, imports=imports,
                  settings=assignments, backend=backend, signature=signature, device=device,
                  transformers_version=built.transformers_version or "", mode=mode,
                  mode_words=render("mode_words.txt.j2", mode=mode).strip(),
                  compile_args=Code("".join(mode_lines("compile", mode))), **lines)

