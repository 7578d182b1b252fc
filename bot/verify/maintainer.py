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

import keyword
from typing import Any

from bot.text.render import render
from harness.core.model_build import ModelBuild

WIDTH = 100            # a literal that fits on a line of this many columns stays on one line
BACKEND_OF = {"dynamo": "eager", "aot_autograd": "aot_eager", "inductor": "inductor"}
DTYPES = {"long": "torch.long", "float": "torch.float32", "bool": "torch.bool", "int": "torch.int32"}
_PLAIN = ("torch._dynamo.config", "torch._inductor.config", "torch.compiler.config")   # reachable from `import torch`


def backend_for(component: str | None, run_backend: str) -> str:
    """The backend the script names: the component's ("eager" for Dynamo, by construction or isolated), else the run's."""
    if component in BACKEND_OF:
        return BACKEND_OF[component]
    return run_backend if run_backend in ("aot_eager", "inductor") else "eager"


def _is_name(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)


def literal(value: Any) -> str:
    """A JSON value as Python source."""
    if isinstance(value, dict) and value and all(_is_name(k) for k in value):
        return "dict(" + ", ".join(f"{k}={literal(v)}" for k, v in value.items()) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return repr(value)


def argument_lines(name: str, value: Any, indent: int) -> list[str]:
    """`name=value,` on one line when it fits, else a dict's fields packed over several lines."""
    pad = " " * indent
    one = f"{pad}{name}={literal(value)},"
    if len(one) <= WIDTH or not (isinstance(value, dict) and value and all(_is_name(k) for k in value)):
        return [one]
    lines, current = [f"{pad}{name}=dict("], pad + "    "
    for key, item in value.items():
        part = f"{key}={literal(item)},"
        if current.strip() and len(current) + 1 + len(part) > WIDTH:
            lines.append(current.rstrip())
            current = pad + "    "
        current += part + " "
    return lines + [current.rstrip(), f"{pad}),"]


def _shape(shape: list[int]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _sizes(shape: list[int]) -> str:
    return ", ".join(str(n) for n in shape) or "()"


def _dtype(spec: dict[str, Any], default: str) -> str:
    return DTYPES[spec.get("dtype", default)]


def _runs(prefix: list[list[Any]]) -> str:
    """[[151652, 1], [151655, 4]] -> '[151652] + [151655] * 4'."""
    return " + ".join(f"[{literal(v)}]" + (f" * {n}" if n != 1 else "") for v, n in prefix)


def _ids(spec: dict[str, Any]) -> str:
    """Token ids: random in [low, high) above the ids to avoid (special tokens), after a literal prefix."""
    batch, length = spec["shape"]
    low, high = spec.get("low", 0), max(spec.get("low", 0) + 1, spec["high"])
    avoid = [a for a in spec.get("avoid", []) if low <= a < high]
    if avoid and max(avoid) + 1 < high - 1:
        low = max(avoid) + 1
    prefix = spec.get("prefix") or []
    tail = length - sum(n for _, n in prefix)
    rand = f"torch.randint({low}, {high}, ({batch}, {tail}))"
    if not prefix:
        return rand
    return f"torch.cat([torch.tensor([{_runs(prefix)}] * {batch}), {rand}], dim=1)"


def input_expr(spec: dict[str, Any]) -> str:
    """One input of a spec (harness/zoo/inputs.py) as one Python expression."""
    kind = spec["kind"]
    if kind == "ids":
        return _ids(spec)
    if kind in ("ones", "zeros"):
        return f"torch.{kind}({_sizes(spec['shape'])}, dtype={_dtype(spec, 'long')})"
    if kind == "randn":
        scale = spec.get("scale", 1.0)
        return f"torch.randn({_sizes(spec['shape'])})" + (f" * {scale!r}" if scale != 1.0 else "")
    if kind == "rand":
        return f"torch.rand({_sizes(spec['shape'])})"
    if kind == "randint":
        return f"torch.randint({spec.get('low', 0)}, {spec['high']}, {_shape(spec['shape'])}, dtype={_dtype(spec, 'long')})"
    if kind == "tensor":
        return f"torch.tensor({literal(spec['value'])}, dtype={_dtype(spec, 'long')})"
    if kind == "arange":
        batch, length = spec["shape"]
        return f"torch.arange({length}, dtype={_dtype(spec, 'long')}).repeat({batch}, 1)"
    if kind == "typed":
        batch, length = spec["shape"]
        rest = length - sum(n for _, n in spec["prefix"])
        return f"torch.tensor([{_runs(spec['prefix'] + [[0, rest]])}] * {batch}, dtype={_dtype(spec, 'long')})"
    if kind == "bbox":   # valid boxes (x0 <= x1, y0 <= y1); their values do not matter
        *lead, _ = spec["shape"]
        half = spec.get("high", 1000) // 2
        return f"torch.tensor([0, 0, {half}, {half}], dtype={_dtype(spec, 'long')}).repeat({', '.join(map(str, lead))}, 1)"
    if kind == "value":
        return literal(spec["value"])
    if kind == "list":
        return "[" + ", ".join(input_expr(item) for item in spec["items"]) + "]"
    raise ValueError(f"unknown input kind {kind!r}")


def setting_lines(settings: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(import lines, assignment lines) for the settings: one `torch.<module>.config.<name> = value` each."""
    modules = sorted({key.rsplit(".config.", 1)[0] + ".config" for key in settings if ".config." in key} - set(_PLAIN))
    imports = [f"import {m}" for m in modules]
    extra = sorted({k.split("._config.", 1)[0] + "._config" for k in settings if "._config." in k})
    imports += [f"import {m}" for m in extra]
    return imports, [f"{key} = {literal(value)}" for key, value in settings.items()]


def render_script(built: ModelBuild, overrides: dict[str, Any], settings: dict[str, Any], backend: str,
                  signature: str, device: str = "cpu") -> str:
    """The maintainer's script for `built` (config fields `overrides`) under `settings`, compiled with `backend`.

    device: where the sweep ran (not cpu: one `torch.set_default_device` line puts the model and inputs there).
    """
    imports, assignments = setting_lines(settings)
    config = [line for name, value in overrides.items() for line in argument_lines(name, value, 4)]
    inputs = [f"    {name}={input_expr(spec)}," for name, spec in (built.spec or {}).items()]
    return render("maintainer_script.py.j2", model=built.model, config_class=built.config_class,
                  seed=int(built.seed or 0), config_lines=config, input_lines=inputs, imports=imports,
                  settings=assignments, backend=backend, signature=signature, device=device,
                  transformers_version=built.transformers_version or "")

