"""Enumerate candidate model classes in the installed transformers, with stated exclusions.

A candidate is a public `*Model`, `*ForCausalLM` or `*ForConditionalGeneration`
class that subclasses `PreTrainedModel`, has a config class and a forward of its
own, whether or not an Auto mapping registers it (the vision, audio and text
towers of composite models are candidates too). Everything else that matches
the name pattern is excluded with a reason, so `zoo list` can explain itself.
Only discovery (`flagsweep zoo lock`) scans; sweeps read the lock.

scan_document() is the scan as plain data (the lock command has the engine call
it in the workers' interpreter, so its own process never imports torch).
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path
from functools import lru_cache

NAME_RE = re.compile(r"(Model|ForCausalLM|ForConditionalGeneration)$")
KINDS = {"ForCausalLM": "causal_lm", "ForConditionalGeneration": "conditional_generation", "Model": "base"}


def kind_of(name: str) -> str:
    """The kind of a class from its name suffix."""
    for suffix, kind in KINDS.items():
        if name.endswith(suffix):
            return kind
    return "base"


def stratum_fallback(name: str) -> str:
    """A stratum when the default config cannot even be made: decide on the class name."""
    return "vl_multimodal" if "ForConditionalGeneration" in name else "decoder_llm"


def is_abstract(name: str, module: str) -> bool:
    """A base class or an Auto factory: never a model (decided by where it lives, not by how its name starts)."""
    return name.endswith(("PreTrainedModel", "PretrainedModel")) or module.startswith("models.auto.")


@lru_cache(maxsize=1)
def scan() -> tuple[dict[str, type], dict[str, str]]:
    """(name -> class) for candidates and (name -> reason) for exclusions; imports every modeling module once (~10 s)."""
    import transformers
    from transformers import PreTrainedModel

    from harness.zoo.build import quiet_transformers

    quiet_transformers()
    class_to_module: dict[str, str] = getattr(transformers, "_class_to_module", {})
    found: dict[str, type] = {}
    excluded: dict[str, str] = {}
    for name in sorted(class_to_module):
        module = class_to_module[name]
        if not NAME_RE.search(name) or ".modeling_" not in module:
            continue
        if is_abstract(name, module):
            excluded[name] = "abstract: a base class or an Auto factory, not a model"
            continue
        try:
            cls = getattr(importlib.import_module(f"transformers.{module}"), name)
        except Exception as exc:  # a missing optional dependency (torchaudio, timm, ...)
            excluded[name] = f"needs a dependency that is not installed: {type(exc).__name__}: {str(exc)[:120]}"
            continue
        if not isinstance(cls, type) or not issubclass(cls, PreTrainedModel):
            excluded[name] = "not a PreTrainedModel subclass"
            continue
        if getattr(cls, "config_class", None) is None:
            excluded[name] = "no config class"
            continue
        if getattr(cls, "forward", None) is nn_module().forward:
            excluded[name] = "abstract: no forward of its own (a container of sub-models)"
            continue
        missing = missing_dependencies(name, cls)
        if missing:
            excluded[name] = f"needs a dependency that is not installed: {', '.join(missing)}"
            continue
        found[name] = cls
    return found, excluded


def nn_module() -> type:
    """torch.nn.Module, imported late (the CLI parent must stay torch-free until it scans)."""
    import torch

    return torch.nn.Module


# requires_backends() names -> the module that must import
BACKEND_MODULES = {"vision": "PIL", "speech": "torchaudio", "sentencepiece": "sentencepiece"}
_REQUIRES = re.compile(r"requires_backends\(\s*\w+\s*,\s*\[?([^\])]+)")


_CLASS = re.compile(r"^class (\w+)", re.M)
TRAINING_ONLY = ("Matcher", "Loss")  # requirements of training-only classes do not stop a forward


@lru_cache(maxsize=None)
def _source_needs(path: Path) -> frozenset[str]:
    """Backends that classes in a modeling file require (requires_backends), minus training-only classes."""
    try:
        text = path.read_text()
    except OSError:
        return frozenset()
    starts = [(m.start(), m.group(1)) for m in _CLASS.finditer(text)]
    needs = set()
    for m in _REQUIRES.finditer(text):
        owner = next((name for pos, name in reversed(starts) if pos < m.start()), "")
        if any(word in owner for word in TRAINING_ONLY):
            continue
        needs.update(BACKEND_MODULES.get(b, b) for b in re.findall(r"\w+", m.group(1)))
    return frozenset(needs)


def _model_types(d: object) -> set[str]:
    if isinstance(d, dict):
        out = {d["model_type"]} if isinstance(d.get("model_type"), str) else set()
        for v in d.values():
            out |= _model_types(v)
        return out
    return set()


def missing_dependencies(name: str, cls: type) -> list[str]:
    """Optional packages the class (or a sub-model its shrunk config still names) requires and this environment lacks."""
    import importlib.util
    import inspect

    import transformers

    models_dir = Path(transformers.__file__).parent / "models"
    needs = set(_source_needs(Path(inspect.getsourcefile(cls) or "")))
    from harness.discovery.discover import plan  # late: discovery imports this module
    from harness.zoo.errors import BuildError

    try:
        cfg = plan(name).config  # after the shrink: a timm backbone there is already a ResNet
    except BuildError:
        cfg = {}
    for model_type in _model_types(cfg):
        folder = model_type.replace("-", "_")
        needs |= _source_needs(models_dir / folder / f"modeling_{folder}.py")
    return sorted(n for n in needs if importlib.util.find_spec(n) is None)


def model_class(name: str) -> type:
    """The transformers class for a candidate name; imports only its own module (workers never scan)."""
    import transformers
    from transformers import PreTrainedModel

    if scan.cache_info().currsize:
        return scan()[0][name]
    module = getattr(transformers, "_class_to_module", {}).get(name)
    if not module or not NAME_RE.search(name) or ".modeling_" not in module:
        raise KeyError(name)
    cls = getattr(importlib.import_module(f"transformers.{module}"), name)
    if not isinstance(cls, type) or not issubclass(cls, PreTrainedModel) or cls.config_class is None:
        raise KeyError(name)
    return cls


def exclusions() -> dict[str, str]:
    """Excluded class names with the reason for each."""
    return dict(scan()[1])


def scan_document() -> dict:
    """The scan as plain data: the transformers version, candidates (name, kind) and exclusions (name -> reason)."""
    import transformers

    found, excluded = scan()
    return {"transformers": transformers.__version__,
            "candidates": [{"model": n, "kind": kind_of(n), "modeling": modeling_hash(found[n])} for n in sorted(found)],
            "excluded": dict(sorted(excluded.items()))}



def modeling_hash(cls: type) -> str:
    """A hash of the source file that defines a class (its AST: comments, docstrings and formatting do not count)."""
    import inspect

    return _file_hash(inspect.getsourcefile(cls) or "")


@lru_cache(maxsize=None)
def _file_hash(path: str) -> str:
    from harness.zoo.fingerprint import code_hash

    try:
        return code_hash(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return ""
