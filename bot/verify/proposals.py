"""The shrink's proposals: smaller builds to try (fewer layers, smaller widths and heads, smaller vocab and
counts, shorter inputs, a batch of one, fewer images, dropped optional inputs, other config fields at
their defaults), as assignments into a stored build's config and spec, and applying them (a new `ModelBuild`). Stdlib only, and the zoo's
size vocabulary (harness/zoo/sizes.py: which keys count layers and heads, which hold widths).

bot/verify/shrink.py runs the search over these; a proposal is only ever kept when its script reproduces.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from harness.core.model_build import ModelBuild
from harness.zoo.sizes import is_count, is_depths, is_heads, is_layers, is_width

KeyPath = tuple[Any, ...]       # "config" or "spec", then keys (and list indexes) into it
DROP = object()                 # assignment value: remove the key

_TOKEN = re.compile(r"(_token_id|_token_index|_token_ids|_id)$")
_OPTIONAL_INPUT = re.compile(r"(mask|^token_type_ids$|^position_ids$|^cache_position$|^labels$)")
_KEEP = ("model_type", "layer_types", "vocab_size")   # never left to the defaults
WIDTH_FLOOR, RUNGS = 4, 4


@dataclass(frozen=True)
class Change:
    """One proposed reduction: a knob, the rung it tries, and the assignments that make it."""

    knob: str                                   # what it reduces ("config.num_hidden_layers")
    rung: Any                                   # the value it tries (what a rejection remembers)
    sets: tuple[tuple[KeyPath, Any], ...]

    @property
    def key(self) -> str:
        return json.dumps([self.knob, self.rung], default=str)


# ---- proposing changes -------------------------------------------------------------------------------


def _ladder(value: int, floor: int) -> list[int]:
    """Smaller values to try for `value`, smallest first: at most RUNGS of its halvings down to `floor`."""
    halvings, v = [], value // 2
    while v >= floor:
        halvings.append(v)
        v //= 2
    if not halvings and value > floor:
        halvings = [floor]
    step = max(1, -(-len(halvings) // RUNGS))
    return sorted(set(halvings[::step]) | set(halvings[-1:]))


def _next(knob: str, rungs: list[Any], rejected: set[str]) -> Any:
    """The smallest rung of a knob not rejected yet (None: nothing left)."""
    for rung in rungs:
        if json.dumps([knob, rung], default=str) not in rejected:
            return rung
    return None


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def _configs(config: dict[str, Any], path: KeyPath = ("config",)) -> list[tuple[KeyPath, dict[str, Any]]]:
    """The config and every sub-config in it (text_config, vision_config, encoder, ...), with their paths."""
    out = [(path, config)]
    for name, value in sorted(config.items()):
        if isinstance(value, dict) and ("model_type" in value or name.endswith(("config", "coder"))):
            out += _configs(value, path + (name,))
    return out


def label(path: KeyPath) -> str:
    """A key path as people read it: `text_config.hidden_size`, `spec.input_ids`."""
    return ".".join(str(p) for p in path[1:]) if path[0] == "config" else ".".join(str(p) for p in path)


def _config_changes(build: ModelBuild, rejected: set[str]) -> list[Change]:
    """Layers, heads, widths, counts and vocab of every (sub-)config: one change per knob."""
    layers, heads, widths, counts, vocab = [], [], [], [], []
    for path, cfg in _configs(build.config or {}):
        for name, value in sorted(cfg.items()):
            knob = label(path + (name,))
            if is_int(value) and is_layers(name) and value > 1:
                sets = [(path + (name,), 1)]
                if name == "num_hidden_layers" and isinstance(cfg.get("layer_types"), list):
                    sets.append((path + ("layer_types",), cfg["layer_types"][:1]))
                if _next(knob, [1], rejected) is not None:
                    layers.append(Change(knob, 1, tuple(sets)))
            elif isinstance(value, list) and is_depths(name) and any(is_int(v) and v > 1 for v in value):
                if _next(knob, [1], rejected) is not None:
                    layers.append(Change(knob, 1, ((path + (name,), [1] * len(value)),)))
            elif is_int(value) and is_count(name) and value > 1:
                rung = _next(knob, _ladder(value, 1), rejected)
                if rung is not None:
                    counts.append(Change(knob, rung, ((path + (name,), rung),)))
            elif name == "vocab_size" and is_int(value):
                rung = _next(knob, _ladder(value, _vocab_floor(build, cfg)), rejected)
                if rung is not None:
                    vocab.append(Change(knob, rung, ((path + (name,), rung),) + _clamp_ids(build, rung)))
        heads += _heads_change(path, cfg, rejected)
        widths += _width_change(path, cfg, rejected)
    return layers + heads + widths + counts + vocab


def _heads_change(path: KeyPath, cfg: dict[str, Any], rejected: set[str]) -> list[Change]:
    """All head counts of one config together (key/value heads never above attention heads)."""
    names = [n for n, v in sorted(cfg.items()) if is_int(v) and is_heads(n) and v > 1]
    if not names:
        return []
    knob = label(path + ("heads",))
    rung = _next(knob, _ladder(max(cfg[n] for n in names), 1), rejected)
    if rung is None:
        return []
    return [Change(knob, rung, tuple((path + (n,), min(cfg[n], rung)) for n in names))]


def _width_change(path: KeyPath, cfg: dict[str, Any], rejected: set[str]) -> list[Change]:
    """All widths of one config scaled by one factor (so their ratios stay as the zoo made them)."""
    names = [n for n, v in sorted(cfg.items())
             if is_int(v) and is_width(n) and not _TOKEN.search(n) and v > WIDTH_FLOOR]
    if not names:
        return []
    knob = label(path + ("widths",))
    smallest = min(cfg[n] for n in names)
    divisors = [smallest // r for r in _ladder(smallest, WIDTH_FLOOR)]      # biggest divisor first
    rung = _next(knob, divisors, rejected)
    if rung is None:
        return []
    return [Change(knob, rung, tuple((path + (n,), max(1, cfg[n] // rung)) for n in names))]


def _vocab_floor(build: ModelBuild, cfg: dict[str, Any]) -> int:
    """The smallest vocab that still holds every token id the config names and the inputs use."""
    ids = [v for n, v in cfg.items() if _TOKEN.search(n) and is_int(v)]
    ids += [v for n, v in cfg.items() if _TOKEN.search(n) and isinstance(v, list) for v in v if is_int(v)]
    for spec in (build.spec or {}).values():
        ids += [tid for tid, _ in spec.get("prefix", []) if is_int(tid)] if isinstance(spec, dict) else []
    return max([16] + [i + 1 for i in ids])


def _clamp_ids(build: ModelBuild, vocab: int) -> tuple[tuple[KeyPath, Any], ...]:
    """Token-id inputs drawn below the new vocab."""
    return tuple((("spec", name, "high"), vocab) for name, spec in sorted((build.spec or {}).items())
                 if isinstance(spec, dict) and spec.get("kind") == "ids" and is_int(spec.get("high"))
                 and spec["high"] > vocab)


def input_shapes(build: ModelBuild) -> list[tuple[str, list[int]]]:
    """(input name, shape) of every shaped input in a build's spec."""
    return [(name, spec["shape"]) for name, spec in sorted((build.spec or {}).items())
            if isinstance(spec, dict) and isinstance(spec.get("shape"), list)]


def _input_changes(build: ModelBuild, rejected: set[str]) -> list[Change]:
    """Shorter inputs (every dimension of one size at once), a batch of one, fewer list items, dropped inputs."""
    out: list[Change] = []
    shapes = input_shapes(build)
    sizes = sorted({d for _, s in shapes for d in s[1:] if is_int(d) and d > 2}, reverse=True)
    for size in sizes:
        knob = f"inputs.length{size}"
        rung = _next(knob, _ladder(size, 1), rejected)
        if rung is not None:
            out.append(Change(knob, rung, tuple((("spec", name, "shape", i), rung) for name, s in shapes
                                                for i, d in enumerate(s) if i > 0 and d == size)))
    batch = [(("spec", name, "shape", 0), 1) for name, s in shapes if s and is_int(s[0]) and s[0] > 1]
    if batch and _next("inputs.batch", [1], rejected) is not None:
        out.append(Change("inputs.batch", 1, tuple(batch)))
    spec = build.spec or {}
    for name, item in sorted(spec.items()):
        if isinstance(item, dict) and item.get("kind") == "list" and len(item.get("items") or []) > 1:
            if _next(f"inputs.{name}.items", [1], rejected) is not None:
                out.append(Change(f"inputs.{name}.items", 1, ((("spec", name, "items"), item["items"][:1]),)))
    if len(spec) > 1:
        for name in sorted(spec):
            if _OPTIONAL_INPUT.search(name) and _next(f"inputs.{name}", ["dropped"], rejected) is not None:
                out.append(Change(f"inputs.{name}", "dropped", ((("spec", name), DROP),)))
    return out


def _defaults_change(build: ModelBuild, rejected: set[str]) -> list[Change]:
    """Every config field that is no size knob, no token id and no sub-config, left to the class default."""
    sets = []
    for path, cfg in _configs(build.config or {}):
        subs = {p[-1] for p, _ in _configs(cfg, path)[1:] if len(p) == len(path) + 1}
        for name in sorted(cfg):
            knob_like = any(is_role(name) for is_role in (is_layers, is_depths, is_heads, is_width, is_count))
            if not (knob_like or _TOKEN.search(name) or name in _KEEP or name in subs):
                sets.append((path + (name,), DROP))
    if not sets or _next("config.other_fields", ["defaults"], rejected) is None:
        return []
    return [Change("config.other_fields", "defaults", tuple(sets))]


def propose(build: ModelBuild, rejected: set[str]) -> list[Change]:
    """This pass's changes, the likeliest big savings first; none that was rejected before."""
    return _config_changes(build, rejected) + _input_changes(build, rejected) + _defaults_change(build, rejected)


def apply(build: ModelBuild, changes: list[Change]) -> ModelBuild:
    """A smaller `build` with the changes made (an assignment under a dropped key is skipped); `build` is untouched."""
    out = {"config": copy.deepcopy(build.config), "spec": copy.deepcopy(build.spec)}
    for change in changes:
        for path, value in change.sets:
            parent: Any = out
            for key in path[:-1]:
                try:
                    parent = parent[key]
                except (KeyError, IndexError, TypeError):
                    parent = None
                    break
            if parent is None:
                continue
            if value is DROP:
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = copy.deepcopy(value)
    return dataclasses.replace(build, config=out["config"], spec=out["spec"])
