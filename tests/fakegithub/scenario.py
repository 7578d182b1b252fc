"""Hand-made nightlies in a real store, for the publish tests and bench/github_calls.py (no torch needed).

A nightly is {model: {config: spec}}; spec is an int (compiled, that many
graphs) or a signature string (crashed with it). Models not named for a
config compile with the baseline's graph count. `calls` gives items the calls
they made to the compiled model (harness.core.calls), as the worker records them. A crash is stored as flake
confirmation leaves a confirmed one (re-run twice, repeated: `attempts` 3), so
the evidence rule for a new issue (bot.issues.filing) sees a confirmed crash.
"""
from __future__ import annotations

import copy
import sqlite3
from typing import Any, Union

from harness.core.calls import Call
from harness.core.options import RunOptions, SweepOptions
from harness.core.outcome import STRATA, Outcome
from state import history, runs
from harness.core.run_environment import RunEnvironment

CONFIGS = {"baseline": {},
           "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True},
           "capture_dynamic_output_shape_ops": {"torch._dynamo.config.capture_dynamic_output_shape_ops": True}}
ENV = {"torch_version": "2.13.0.dev20261120+cpu", "torch_git": "abc1234", "transformers_version": "5.23.0",
       "python_version": "3.11.7", "device": "cpu", "flagsweep_version": "0.1.0"}
Spec = Union[int, str]
CONFIRMED_ATTEMPTS = 3      # the first run and two flake re-runs, all crashed

CSO, CDO = "capture_scalar_outputs", "capture_dynamic_output_shape_ops"
M = [f"Model{i:02d}ForCausalLM" for i in range(10)]   # the models of corpus(), in order

SIG_A = "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN}"
SIG_B = "GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(uN, 0)"
SIG_C = "Unsupported: dynamic shape operator: aten.nonzero.default"


def outcome(model: str, config: str, spec: Spec, stratum: str) -> Outcome:
    """One hand-made outcome."""
    if isinstance(spec, int):
        return Outcome(model=model, config=config, status="ok", graphs=spec, stratum=stratum, ops=10 * spec,
                       fingerprint=f"fp-{model}")
    error_type, _, shape = spec.partition(": ")
    message = shape.replace("uN", "u7").replace("{uN}", "{u7}")
    tb = ("Traceback (most recent call last):\n  File \"torch/_dynamo/convert_frame.py\", line 1, in _compile\n"
          f"torch.fx.experimental.symbolic_shapes.{error_type}: {message}")
    return Outcome(model=model, config=config, status="error", stratum=stratum, error_type=error_type,
                   error_message=message, signature=spec, traceback=tb,
                   torch_frame="torch/fx/experimental/symbolic_shapes.py:_check", fingerprint=f"fp-{model}",
                   attempts=CONFIRMED_ATTEMPTS)


def record_nightly(conn: sqlite3.Connection, date: str, results: dict[str, dict[str, Spec]],
                   env: dict[str, Any] | None = None, kind: str = "nightly", backend: str = "count",
                   calls: dict[tuple[str, str], list[Call]] | None = None, configs: dict | None = None) -> int:
    """Store and finalize one nightly run (or an ad-hoc run of another `kind`); returns its id. `calls`: the calls
    of some items, by (model, config); `configs`: other configs than CONFIGS (baseline first)."""
    configs = configs or CONFIGS
    models = sorted(results)
    run_id = runs.create_run(conn, environment=RunEnvironment.from_dict(env or ENV), models=models, configs=configs,
                             kind=kind,
                             nightly=date if kind == "nightly" else None, options=RunOptions(SweepOptions(backend=backend, device="cpu")))
    for i, model in enumerate(models):
        stratum = STRATA[i % len(STRATA)]
        base = results[model].get("baseline", 3)
        for config in configs:
            made = outcome(model, config, results[model].get(config, base), stratum)
            made.calls = list((calls or {}).get((model, config), []))
            runs.record_outcome(conn, run_id, made)
    runs.finish_run(conn, run_id)
    history.finalize_run(conn, run_id)
    return run_id


def corpus(n: int = 10) -> dict[str, dict[str, Spec]]:
    """Nightly 1 of the story: n models; under capture_scalar_outputs M00, M01 crash with A, M02 with B,
    M03 and M04 need fewer graphs; under capture_dynamic_output_shape_ops M00 crashes with C."""
    models = {f"Model{i:02d}ForCausalLM": {"baseline": 3} for i in range(n)}
    names = sorted(models)
    cso, cdo = "capture_scalar_outputs", "capture_dynamic_output_shape_ops"
    models[names[0]].update({cso: SIG_A, cdo: SIG_C})
    models[names[1]][cso] = SIG_A
    models[names[2]][cso] = SIG_B
    models[names[3]][cso] = 1
    models[names[4]][cso] = 2
    return models


def nightly3() -> dict[str, dict[str, Spec]]:
    """One model fixed (M01 no longer crashes with A) and one new crash (M05 crashes with B)."""
    n = corpus()
    n[M[1]][CSO] = 1
    n[M[5]][CSO] = SIG_B
    return n


def quiet_c(n: dict[str, dict[str, Spec]]) -> dict[str, dict[str, Spec]]:
    """The same nightly with signature C gone (M00 compiles under CDO)."""
    n = copy.deepcopy(n)
    n[M[0]][CDO] = 3
    return n
