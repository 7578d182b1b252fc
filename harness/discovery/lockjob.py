"""Inside a `flagsweep zoo lock` worker: build by discovery, stage the lock entry, verify it as a sweep would.

Imported by the lock's workers as an extra module (see harness/discovery/locker.py);
importing it points build() at stage_build. The stage directory comes from
FLAGSWEEP_ZOO_STAGE; each model's entry lands there as <model>.json, so an
interrupted lock resumes where it stopped.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.zoo import registry
from harness.zoo.build import Built, materialize
from harness.discovery.discover import discover, plan
from harness.discovery.enumerate import kind_of, stratum_fallback
from harness.zoo.errors import BuildError
from harness.zoo.lock import seal
from harness.discovery.locker import STAGE_ENV


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


def discovered_entry(model: str) -> dict:
    """The lock entry discovery makes for a class (status ok until verified); BuildError if discovery fails."""
    import transformers

    d = discover(model)
    return seal({"model": model, "config_class": d.config_class, "stratum": d.stratum, "kind": kind_of(model),
                 "status": "ok", "cause": None, "config": _json_data(d.config), "spec": _json_data(d.spec),
                 "text_only": d.text_only, "applied": {"recipes": d.recipes, "fixups": d.fixups, "repairs": d.repairs},
                 "transformers": transformers.__version__})


def verify(entry: dict, device: str) -> tuple[dict, Built | None]:
    """Build the entry exactly as a sweep will and run one eager forward: the entry with its final status."""
    import torch

    try:
        built = materialize(entry, device)
        with torch.no_grad():
            built.module(**built.inputs)
    except BuildError as exc:
        return seal({**entry, "status": exc.status, "cause": exc.cause[:300]}), None
    except Exception as exc:
        return seal({**entry, "status": "eager_error", "cause": f"{type(exc).__name__}: {str(exc)[:280]}"}), None
    return entry, built


def stage(entry: dict, stage_dir: Path) -> None:
    """Write one model's entry into the stage directory atomically."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=stage_dir, prefix=".stage.")
    with os.fdopen(fd, "w") as f:
        json.dump(entry, f, sort_keys=True)
    os.replace(tmp, stage_dir / f"{entry['model']}.json")


def stage_build(model: str, device: str) -> Built:
    """build() in a lock worker: discover, verify, stage; raise the failure so the worker reports it too."""
    stage_dir = Path(os.environ[STAGE_ENV])
    try:
        entry = discovered_entry(model)
    except BuildError as exc:
        stage(failed_entry(model, exc.status, exc.cause), stage_dir)
        raise
    except Exception as exc:  # discovery itself broke on this class: recorded, not dropped
        stage(failed_entry(model, "create_error", f"{type(exc).__name__}: {str(exc)[:280]}"), stage_dir)
        raise BuildError("create_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    entry, built = verify(entry, device)
    stage(entry, stage_dir)
    if built is None:
        raise BuildError(entry["status"], entry["cause"])
    built.fingerprint = entry["hash"]
    return built


registry.BUILDER = stage_build
