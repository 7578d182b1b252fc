"""Build one tiny model and its inputs from its lock entry: config class + locked config -> module, spec -> inputs.

No discovery here: no probing, no error-text parsing, no source regex. What
this module and inputs.py do is all that turns a lock entry into tensors, so
their code (as an AST, comments aside) is part of every model's fingerprint.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

from harness.zoo import lock as lock_mod
from harness.zoo import registry
from harness.zoo.errors import BuildError, LockError
from harness.zoo.fingerprint import digest, materialize_version

SEED = 0


@dataclass
class Built:
    """A tiny model ready to run: module (eval, on device), inputs (kwargs), and what it is."""

    module: Any
    inputs: dict
    text_only: bool = False
    fingerprint: str = ""
    stratum: str = ""
    spec: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)   # the config dict it was built from (what a reproducer embeds)


def entry(model: str) -> dict:
    """The checked lock entry of a model for the installed transformers (LockError / CorruptEntry if none or bad)."""
    return lock_mod.current().entry(model)


def fingerprint(model: str) -> str:
    """The fingerprint of a model's build: what its lock entry builds (lock.build_hash: the same across a transformers
    bump when neither the entry nor the class's modeling source changed) plus the code that turns an entry into tensors."""
    if model in registry.EXTRA:
        return digest({"extra": model, "code": materialize_version()})
    return digest({"build": lock_mod.build_hash(entry(model)), "code": materialize_version()})


def model_class(name: str, module_name: str | None = None) -> type:
    """The transformers class of a locked model, importing only its own modeling module."""
    import importlib

    import transformers

    module = module_name or getattr(transformers, "_class_to_module", {}).get(name)
    if not module:
        raise BuildError("create_error", f"{name} is not a class of transformers {transformers.__version__}")
    return getattr(importlib.import_module(f"transformers.{module}"), name)


def config_class_of(cls: type) -> type:
    """The config class a model class builds from: its own, or, where that is a composite (sub_configs) and the
    class is one of its parts, that part's config (transformers 5.18 gives Aimv2TextModel Aimv2Config, which
    has no hidden_size). The part is the one sub-config whose key names what the class's name adds to the
    composite's ("Aimv2" + "TextModel": text_config); a class that names none, or several, keeps its own."""
    composite = cls.config_class
    subs = getattr(composite, "sub_configs", None) or {}
    added = _name_after(cls.__name__.lower(), composite.__name__.lower().removesuffix("config")) if subs else ""
    parts = {c for key, c in subs.items() if key.endswith("_config") and key[:-len("_config")].replace("_", "") in added
             and isinstance(c, type) and getattr(c, "model_type", "")}
    return parts.pop() if len(parts) == 1 else composite


def _name_after(name: str, stem: str) -> str:
    """What `name` adds after the prefix it shares with `stem` ("" when it shares none)."""
    n = len(os.path.commonprefix([name, stem]))
    return name[n:] if n else ""


def _check_runtime(e: dict) -> None:
    """Refuse a lock made for another transformers than the one this interpreter imports."""
    import transformers

    if e["transformers"] != transformers.__version__:
        raise LockError(f"the zoo lock is for transformers {e['transformers']}, "
                        f"this interpreter has transformers {transformers.__version__}: run `flagsweep zoo lock`")


def materialize(e: dict, device: str = "cpu") -> Built:
    """Module and inputs from a lock entry (status ok or eager_error); BuildError for an entry that never built."""
    import torch

    from harness.zoo.inputs import make_inputs

    if e["status"] not in ("ok", "eager_error"):
        raise BuildError(e["status"] if e["status"] in ("create_error", "input_error") else "create_error",
                         f"locked as {e['status']}: {e['cause']}")
    _check_runtime(e)
    cls = model_class(e["model"])
    config_cls = config_class_of(cls)
    if config_cls.__name__ != e["config_class"]:
        raise BuildError("create_error", f"{e['model']} builds from {config_cls.__name__}, "
                                         f"the lock says {e['config_class']}")
    try:   # a copy: some configs change what they are given in place (Levit appends to down_ops on 5.20)
        config = config_cls.from_dict(copy.deepcopy(e["config"]))
        torch.manual_seed(SEED)
        module = cls(config).float().eval().to(device)
    except Exception as exc:
        raise BuildError("create_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    try:
        inputs = make_inputs(e["spec"], SEED, device)
    except Exception as exc:
        raise BuildError("input_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return Built(module, inputs, e["text_only"], "", e["stratum"], e["spec"], e["config"])


def build(model: str, device: str = "cpu") -> Built:
    """Build the tiny model (eval, on device) and its inputs from its lock entry; BuildError on failure."""
    if model in registry.EXTRA:
        return registry.EXTRA[model][1](device)
    quiet_transformers()
    try:
        built = materialize(entry(model), device)
    except LockError as exc:  # no entry, a bad one, or a lock for another transformers: named, never rebuilt
        raise BuildError("create_error", str(exc)) from None
    built.fingerprint = fingerprint(model)
    return built


def prepare(model: str) -> None:
    """Import what building `model` takes (transformers, quieted; nothing for a test-only registered model), so that
    a worker times a build without the import and a worker of test-only models never imports transformers."""
    if model not in registry.EXTRA:
        quiet_transformers()


def quiet_transformers() -> None:
    """Silence transformers' config warnings (special ids out of the shrunk range are expected)."""
    import transformers

    transformers.logging.set_verbosity_error()
