"""The accuracy reproducer of a wrong result: a short script a PyTorch maintainer reads, ending in assert_close.

Rendered from a stored (shrunk) build like the maintainer's crash script (bot/verify/maintainer.py: the config
class built from its fields, the model in eval mode, each input on one line, one `torch.<module>.config.<name> =
value` line per setting, `torch.compile(model, backend=...)`), with the eager reference a deep copy made before
compiling. It makes the first call, then the scenario's change (harness.engine.scenarios: the second input spec,
the per-feature scaling hook on the middle submodule, the seeded in-place weight step), and ends in
`torch.testing.assert_close` on the output that was wrong, at the run's [accuracy] tolerances. The scenario's
constants (HOOK_SCALE, WEIGHT_STEP and the weight step's seed) are harness.core.calls', the worker's too. The baseline's script is the same
one with the baseline's settings. Stdlib only: torch is never imported here.

In another mode than eval the script writes the mode as the maintainer's crash script does (bot.verify.maintainer
mode_lines, the one place a mode becomes script lines), so eager and the compiled model make the worker's step
(harness/engine/in_mode.py) in a few lines: the attention implementation, `model.train()` with dropout 0, the loss
(the model's own where labels are built, else the sweep's fixed reduction) and its backward, autocast, dynamic=True or
marked inputs. In train or half precision (the worker's step oracle,
harness.engine.step_oracle) the first call is the only one: its output and, in train, each parameter's gradient are
compared at the mode's tolerance (harness.core.modes.tolerance), and beyond it a float64 run of the same step without
autocast arbitrates, as PyTorch's `same()` does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.text.render import render
from bot.text.scripts import Code, compose, python_literal
from bot.verify.maintainer import WIDTH, argument_line, backend_for, input_lines, mode_lines, setting_lines
from bot.verify.script import NotRenderable
from harness.core.calls import HOOK_SCALE, WEIGHT_SEED_OFFSET, WEIGHT_STEP, output_path
from harness.core.correctness import wrong_parts
from harness.core.model_build import ModelBuild
from harness.core.modes import DEFAULT, Mode, tolerance
from harness.zoo import second
from harness.zoo.errors import LockError

MISMATCH = "torch.testing.assert_close"   # the driver's `exception` when the script's comparison failed


@dataclass(frozen=True)
class Case:
    """What a wrong result's reproducer checks, besides the build: its signature, both settings, how it compiles."""

    signature: str                  # wrong_result: <scenario>: <output>
    settings: dict[str, Any]        # the flag's: the run's base settings, then the config's
    baseline: dict[str, Any]        # the baseline's, the same way
    backend: str                    # the run's (bot.verify.maintainer.backend_for names it in the script)
    device: str
    rtol: float                     # the run's [accuracy] tolerances
    atol: float
    mode: Mode = DEFAULT            # the run's mode: the script runs the model in it


@dataclass(frozen=True)
class ScenarioRules:
    """The scenarios' changes as the worker makes them (harness.core.calls), for the script to make them alike."""

    hook_scale: tuple[float, float] = HOOK_SCALE
    weight_step: float = WEIGHT_STEP
    weight_seed: Code = compose("SEED + {}", python_literal(WEIGHT_SEED_OFFSET))   # the step generator's seed, as written


def stepped(mode: Mode) -> bool:
    """Whether the mode is judged by the worker's step oracle (train, half precision): one call, outputs and
    gradients under `output` and `grad`."""
    return mode.train or mode.half


def step_accessor(output: str) -> Code:
    """`accessor` for a step oracle's answer: `["output"]` then the output's first step, or `["grad"]["<parameter>"]`
    (a parameter's name holds dots: it is one key)."""
    head, _, rest = output.partition(".")
    if head == "grad" and rest:
        return compose('["grad"][{}]', python_literal(rest))
    if head != "output" and not output.startswith("output["):
        raise NotRenderable(f"output {output!r} is neither the step's output nor a gradient")
    inner = output[len("output"):].lstrip(".")
    return compose('["output"]{}', accessor(inner) if inner else Code(""))


def model_output(output: str, mode: Mode) -> str | None:
    """The model's own output a wrong output names (what `repro --wrong` asks the model has): the output itself where
    the mode is judged as eval is; under a step oracle's `output` the path below it; None for the whole output or a
    parameter's gradient (every model has those)."""
    if not stepped(mode):
        return output
    inner = output[len("output"):].lstrip(".") if output.startswith("output") else ""
    return inner or None


def model_parameter(output: str, mode: Mode) -> str | None:
    """The parameter whose gradient a wrong output names in train (`grad.<parameter>`: what `repro --wrong` asks the
    model has, before the script is rendered); None for any other output."""
    head, _, rest = output.partition(".")
    return rest if mode.train and head == "grad" and rest else None


def accessor(output: str) -> Code:
    """How the script picks the wrong output from a model's outputs: `["logits"]`, `[0]`; "" for the whole output
    (a plain tensor, named "output" by harness.engine.accuracy). The output is an output path (harness.core.calls)."""
    if output == "output":
        return Code("")
    top = output_path(output)[0]
    return compose("[{}]", python_literal(top))


def config_lines(config: dict[str, Any]) -> list[Code]:
    """The config's fields as `name=value,` packed into lines of WIDTH columns (one literal when keys are not names)."""
    if not all(isinstance(k, str) and k.isidentifier() for k in config):
        return [compose("    **{},", python_literal(config))]
    lines, current = [], Code("   ")
    for key, value in config.items():
        part = argument_line(key, value, " ")
        if current.strip() and len(current) + len(part) > WIDTH:
            lines.append(current)
            current = Code("   ")
        current = compose("{}{}", current, part)
    return lines + [current] if current.strip() else lines


def _second_inputs(built: ModelBuild) -> list[str]:
    """The second call's inputs: the spec the worker used, stored with the build (one rule: the sweep's call and
    this script's are the same); a build stored before it was kept: the sealed spec, or the rule's first candidate."""
    if built.second_spec is not None:
        return input_lines(built.second_spec)
    try:
        found = second.candidates(built.model, built.spec or {})
    except LockError as exc:
        raise NotRenderable(f"no second input spec for {built.model}: {exc}") from exc
    if not found:
        raise NotRenderable("the second-size rule finds no other size for these inputs")
    return input_lines(found[0])


def _settings(case: Case, baseline: bool) -> tuple[list[str], list[str], list[str]]:
    """(imports, the settings both compiles share, the flag's own lines); the baseline's script has no flag lines."""
    shared = {k: v for k, v in case.baseline.items() if case.settings.get(k, object()) == v}
    own = case.baseline if baseline else {k: v for k, v in case.settings.items() if k not in shared}
    imports, common = setting_lines({**shared, **(own if baseline else {})})
    flag_imports, flag = setting_lines({} if baseline else own)
    return list(dict.fromkeys(imports + flag_imports)), common, flag


def render_wrong(built: ModelBuild | None, case: Case, *, baseline: bool = False) -> str:
    """The accuracy reproducer of `case` on `built` (baseline: the same script under the baseline's settings)."""
    if not built or not built.config_class or not built.model:
        raise NotRenderable("the run stored no build data for this model")
    scenario, output = wrong_parts(case.signature)
    if stepped(case.mode) and scenario != "first":
        raise NotRenderable(f"mode {case.mode.name} makes the first call only, not {scenario}")
    imports, common, flag = _settings(case, baseline)
    pick = step_accessor(output) if stepped(case.mode) else accessor(output)
    return render("repro_wrong.py.j2", model=built.model, config_class=built.config_class,
                  seed=int(built.seed or 0), config_lines=config_lines(built.config or {}),
                  input_lines=input_lines(built.spec or {}),
                  second_lines=_second_inputs(built) if scenario == "second_size" else [],
                  imports=imports, common=common, flag=flag, baseline=baseline,
                  backend=_backend(case), device=case.device, signature=case.signature,
                  scenario=scenario, output=output, pick=pick, rtol=case.rtol, atol=case.atol,
                  rules=ScenarioRules(), transformers_version=built.transformers_version or "", **_mode_parts(case, built))


def _backend(case: Case) -> str:
    """The backend the script names (the run's, as backend_for names it), as the mode compiled it
    (harness.core.modes.Mode.compiles_under: train's `eager` is `aot_eager`)."""
    return case.mode.compiles_under(backend_for(None, case.backend))


def _mode_parts(case: Case, built: ModelBuild) -> dict[str, Any]:
    """What the template needs of the mode: nothing for eval (its script is as before modes); else the mode's lines as
    the maintainer's script writes them (bot.verify.maintainer.mode_lines), the step in the script's `call`."""
    if case.mode.is_default:
        return {"mode": None, "prepare": [], "labels": [], "loss": []}
    mode, steps = case.mode, stepped(case.mode)
    lines = {part: mode_lines(part, mode, model=built.model, spec=built.spec, device=case.device)
             for part in ("prepare", "labels", "loss", "mark")}
    step = mode_lines("step", mode, device=case.device, into=Code("output = " if steps else "return "),
                      enabled=Code("half") if mode.half else None,
                      run=Code("(module if run is None else run)" if steps else "module"))
    return {"mode": mode, "stepped": steps, "tol": tolerance(mode, case.rtol),
            "mode_words": render("mode_words.txt.j2", mode=mode).strip(),
            "compile_args": Code("".join(mode_lines("compile", mode))), "step": step, **lines}
