"""The `zoo lock` job, run in engine workers: discover one class and verify its entry as a sweep would build it.

locker.py hands the engine this job by name ("harness.discovery.lockjob:lock_entry"); a
worker calls it with (model, device), and the entry goes back to the parent as the job's
answer (in JSON text, as every job's: harness.engine.worker.run_job; a config may hold an infinity). Nothing here writes files or changes another module's state.
"""
from __future__ import annotations

import json
from typing import Any

from harness.discovery.caps import CAPS
from harness.discovery.discover import discover, plan
from harness.discovery.enumerate import kind_of, stratum_fallback
from harness.engine.mode_probe import probe
from harness.zoo.build import SEED, materialize
from harness.zoo.errors import BuildError
from harness.zoo.inputs import make_inputs
from harness.zoo.lock import UNCAPPED_FIELD, seal
from harness.zoo.mode_record import FIELD as MODES
from harness.zoo.second import FIELD as SECOND_SPEC, WHY_FIELD as SECOND_WHY, first_that_runs
from harness.zoo.sizes import second_specs


def lock_entry(model: str, device: str) -> dict:
    """The lock entry of one class: discovered and verified (status ok), or why it could not be (never raises).

    With every cap first (caps.CAPS); a class that does not build or run in eager with them gives them up, the last
    first, until one plan works or none is left, and its entry names the caps it gave up and why (UNCAPPED_FIELD).
    """
    first = None
    for n in range(len(CAPS), -1, -1):
        caps = CAPS[:n]
        if n < len(CAPS) and plan_of(model, caps) == plan_of(model, CAPS[:n + 1]):
            continue   # the cap given up changed nothing in this class: the same plan fails the same way
        entry = capped_entry(model, caps, device)
        first = first or entry
        if entry["status"] == "ok" or n == 0:
            break
    if entry["status"] != "ok" or entry is first:
        return entry
    return seal({**entry, UNCAPPED_FIELD: f"{', '.join(CAPS[len(caps):])}: {first['status']}: {first['cause']}"[:300]})


def plan_of(model: str, caps: tuple[str, ...]) -> dict | None:
    """The config a plan with these caps builds, or None when planning fails."""
    try:
        return plan(model, caps).config
    except Exception:
        return None


def capped_entry(model: str, caps: tuple[str, ...], device: str) -> dict:
    """The verified entry of one class with the named caps, or why it could not be made (never raises)."""
    try:
        entry = discovered_entry(model, caps)
    except BuildError as exc:
        return failed_entry(model, exc.status, exc.cause)
    except Exception as exc:  # discovery itself broke on this class: recorded, not dropped
        return failed_entry(model, "create_error", f"{type(exc).__name__}: {str(exc)[:280]}")
    return verify(entry, device)


def reverify_entry(model: str, device: str) -> dict:
    """`zoo lock --reverify`: the package lock's entry of one class verified again as `verify` does now (built, one
    eager forward, its second input spec sealed again), without discovering it again."""
    from harness.zoo import lock

    entry = lock.current().entry(model)
    return verify({k: v for k, v in entry.items() if k not in (SECOND_SPEC, SECOND_WHY)}, device)


def _json_data(data: Any) -> Any:
    """Data as it will read back from the lock file (tuples become lists, odd values strings)."""
    return json.loads(json.dumps(data, sort_keys=True, default=str))


def failed_entry(model: str, status: str, cause: str) -> dict:
    """The lock entry of a class that could not be locked: its status and cause, what is known of it."""
    import transformers

    try:
        p = plan(model)
        config_class, stratum = p.config_class, p.stratum
    except Exception:  # the default config itself failed: decide on the name
        config_class, stratum = "", stratum_fallback(model)
    return seal({"model": model, "config_class": config_class, "stratum": stratum, "kind": kind_of(model),
                 "status": status, "cause": cause[:300], "config": {}, "spec": {}, "text_only": False,
                 "applied": {"recipes": [], "fixups": [], "repairs": []}, "transformers": transformers.__version__})


def discovered_entry(model: str, caps: tuple[str, ...] = CAPS) -> dict:
    """The lock entry discovery makes for a class (status ok until verified); BuildError if discovery fails."""
    import transformers

    d = discover(model, caps=caps)
    return seal({"model": model, "config_class": d.config_class, "stratum": d.stratum, "kind": kind_of(model),
                 "status": "ok", "cause": None, "config": _json_data(d.config), "spec": _json_data(d.spec),
                 "text_only": d.text_only, "applied": {"recipes": d.recipes, "fixups": d.fixups, "repairs": d.repairs},
                 "transformers": transformers.__version__})


def verify(entry: dict, device: str) -> dict:
    """Build the entry exactly as a sweep will and run one eager forward: the entry with its final status, its second
    input spec and its modes record (harness.zoo.mode_record)."""
    import torch

    try:
        built = materialize(entry, device)
        with torch.no_grad():
            built.module(**built.inputs)
    except BuildError as exc:
        return seal({**entry, "status": exc.status, "cause": exc.cause[:300]})
    except Exception as exc:
        return seal({**entry, "status": "eager_error", "cause": f"{type(exc).__name__}: {str(exc)[:280]}"})
    found, why = second_spec(built.module, entry["spec"], device)
    entry = {**entry, MODES: probe(built.module, built.inputs, device)}
    return seal({**entry, SECOND_SPEC: found} if found is not None else {**entry, SECOND_WHY: why})


def modes_entry(model: str, device: str) -> dict:
    """`zoo lock --modes-probe`: the package lock's entry of one class with its modes record probed again
    (harness.engine.mode_probe.probe) and nothing else changed; the entry as locked where it no longer builds."""
    from harness.zoo import lock

    entry = lock.current().entry(model)
    try:
        built = materialize(entry, device)
    except Exception:   # its build is `--reverify`'s to judge: this job changes only the record
        return entry
    return seal({**entry, MODES: probe(built.module, built.inputs, device)})


def second_spec(module: Any, spec: dict, device: str) -> tuple[dict | None, str]:
    """The first of the rule's second specs (harness.zoo.sizes.second_specs) that runs in eager, or None and why."""
    import torch

    def eager(candidate: dict) -> None:
        with torch.no_grad():
            module(**make_inputs(candidate, SEED, device))

    return first_that_runs(second_specs(spec), eager)
