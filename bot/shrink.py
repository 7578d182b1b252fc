"""Minimal reproducers: shrink a confirmed reproducer's build while the same signature still reproduces.

Given the stored build data of a reproducer that was seen to fail (config class,
config dict, input spec, seed), propose smaller builds - fewer layers, smaller
widths and heads, smaller vocab and counts, shorter inputs, a batch of one,
fewer images, dropped optional inputs, other config fields at their defaults -
and keep each only when its rendered script, run on the run's own interpreter
through the same runner that verified it, fails with the same signature.
Greedy and delta-debugging style: every pass proposes one change per knob (the
smallest rung first), tries them all at once, and splits a rejected group in
halves down to single changes; a rejected change comes back one rung larger in
the next pass. It stops when nothing is left to try, or before a try would
overrun the time budget. Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

# (stored build of the model, settings, backend, device, python, timeout) -> (script, result)
Runner = Callable[[dict[str, Any] | None, dict[str, Any], str, str, str, float], tuple[str, dict[str, Any]]]
KeyPath = tuple[Any, ...]       # keys (and list indexes) into a build dict
DROP = object()                 # assignment value: remove the key

_LAYERS = re.compile(r"^(num_\w*layers|\w+_layers|n_layers?|layers|depth|\w+_depth)$")
_DEPTHS = re.compile(r"^(depths|\w+_depths)$")
_HEADS = re.compile(r"^(num_attention_heads|num_key_value_heads|num_heads|n_heads?|\w+_attention_heads|\w+_num_heads)$")
_WIDTH = re.compile(r"^(hidden_size|intermediate_size|d_model|d_ff|d_kv|dim|hidden_dim|embed_dim|ffn_dim|head_dim|"
                    r"projection_dim|num_filters|upsample_groups|vector_quantization_hidden_dimension|"
                    r"\w+_hidden_size|\w+_intermediate_size|\w+_ffn_dim|\w+_dim)$")
_COUNTS = re.compile(r"^(num_quantizers|codebook_size|num_codebooks|num_experts|num_local_experts|n_routed_experts)$")
_TOKEN = re.compile(r"(_token_id|_token_index|_token_ids|_id)$")
_OPTIONAL_INPUT = re.compile(r"(mask|^token_type_ids$|^position_ids$|^cache_position$|^labels$)")
_KEEP = ("model_type", "layer_types", "vocab_size")   # never left to the defaults
WIDTH_FLOOR, RUNGS = 4, 4


def reproduces(result: dict[str, Any], signature: str) -> bool:
    """The one rule: a script reproduces a crash when it failed and its signature (or status) is the same."""
    status = result.get("status")
    return status not in (None, "ok") and (result.get("signature") or status) == signature


@dataclass(frozen=True)
class Change:
    """One proposed reduction: a knob, the rung it tries, and the assignments that make it."""

    knob: str                                   # what it reduces ("config.num_hidden_layers")
    rung: Any                                   # the value it tries (what a rejection remembers)
    sets: tuple[tuple[KeyPath, Any], ...]

    @property
    def key(self) -> str:
        return json.dumps([self.knob, self.rung], default=str)


class Shrunk(NamedTuple):
    """The smallest verified build: (shrunk build data, its script, stats of the shrink)."""

    build: dict[str, Any]
    script: str
    stats: dict[str, Any]


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


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _configs(config: dict[str, Any], path: KeyPath = ("config",)) -> list[tuple[KeyPath, dict[str, Any]]]:
    """The config and every sub-config in it (text_config, vision_config, encoder, ...), with their paths."""
    out = [(path, config)]
    for name, value in sorted(config.items()):
        if isinstance(value, dict) and ("model_type" in value or name.endswith(("config", "coder"))):
            out += _configs(value, path + (name,))
    return out


def _label(path: KeyPath) -> str:
    return ".".join(str(p) for p in path[1:]) if path[0] == "config" else ".".join(str(p) for p in path)


def _config_changes(build: dict[str, Any], rejected: set[str]) -> list[Change]:
    """Layers, heads, widths, counts and vocab of every (sub-)config: one change per knob."""
    layers, heads, widths, counts, vocab = [], [], [], [], []
    for path, cfg in _configs(build.get("config") or {}):
        for name, value in sorted(cfg.items()):
            knob = _label(path + (name,))
            if _is_int(value) and _LAYERS.match(name) and value > 1:
                sets = [(path + (name,), 1)]
                if name == "num_hidden_layers" and isinstance(cfg.get("layer_types"), list):
                    sets.append((path + ("layer_types",), cfg["layer_types"][:1]))
                if _next(knob, [1], rejected) is not None:
                    layers.append(Change(knob, 1, tuple(sets)))
            elif isinstance(value, list) and _DEPTHS.match(name) and any(_is_int(v) and v > 1 for v in value):
                if _next(knob, [1], rejected) is not None:
                    layers.append(Change(knob, 1, ((path + (name,), [1] * len(value)),)))
            elif _is_int(value) and _COUNTS.match(name) and value > 1:
                rung = _next(knob, _ladder(value, 1), rejected)
                if rung is not None:
                    counts.append(Change(knob, rung, ((path + (name,), rung),)))
            elif name == "vocab_size" and _is_int(value):
                rung = _next(knob, _ladder(value, _vocab_floor(build, cfg)), rejected)
                if rung is not None:
                    vocab.append(Change(knob, rung, ((path + (name,), rung),) + _clamp_ids(build, rung)))
        heads += _heads_change(path, cfg, rejected)
        widths += _width_change(path, cfg, rejected)
    return layers + heads + widths + counts + vocab


def _heads_change(path: KeyPath, cfg: dict[str, Any], rejected: set[str]) -> list[Change]:
    """All head counts of one config together (key/value heads never above attention heads)."""
    names = [n for n, v in sorted(cfg.items()) if _is_int(v) and _HEADS.match(n) and v > 1]
    if not names:
        return []
    knob = _label(path + ("heads",))
    rung = _next(knob, _ladder(max(cfg[n] for n in names), 1), rejected)
    if rung is None:
        return []
    return [Change(knob, rung, tuple((path + (n,), min(cfg[n], rung)) for n in names))]


def _width_change(path: KeyPath, cfg: dict[str, Any], rejected: set[str]) -> list[Change]:
    """All widths of one config scaled by one factor (so their ratios stay as the zoo made them)."""
    names = [n for n, v in sorted(cfg.items())
             if _is_int(v) and _WIDTH.match(n) and not _TOKEN.search(n) and v > WIDTH_FLOOR]
    if not names:
        return []
    knob = _label(path + ("widths",))
    smallest = min(cfg[n] for n in names)
    divisors = [smallest // r for r in _ladder(smallest, WIDTH_FLOOR)]      # biggest divisor first
    rung = _next(knob, divisors, rejected)
    if rung is None:
        return []
    return [Change(knob, rung, tuple((path + (n,), max(1, cfg[n] // rung)) for n in names))]


def _vocab_floor(build: dict[str, Any], cfg: dict[str, Any]) -> int:
    """The smallest vocab that still holds every token id the config names and the inputs use."""
    ids = [v for n, v in cfg.items() if _TOKEN.search(n) and _is_int(v)]
    ids += [v for n, v in cfg.items() if _TOKEN.search(n) and isinstance(v, list) for v in v if _is_int(v)]
    for spec in (build.get("spec") or {}).values():
        ids += [tid for tid, _ in spec.get("prefix", []) if _is_int(tid)] if isinstance(spec, dict) else []
    return max([16] + [i + 1 for i in ids])


def _clamp_ids(build: dict[str, Any], vocab: int) -> tuple[tuple[KeyPath, Any], ...]:
    """Token-id inputs drawn below the new vocab."""
    return tuple((("spec", name, "high"), vocab) for name, spec in sorted((build.get("spec") or {}).items())
                 if isinstance(spec, dict) and spec.get("kind") == "ids" and _is_int(spec.get("high"))
                 and spec["high"] > vocab)


def _shapes(build: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [(name, spec["shape"]) for name, spec in sorted((build.get("spec") or {}).items())
            if isinstance(spec, dict) and isinstance(spec.get("shape"), list)]


def _input_changes(build: dict[str, Any], rejected: set[str]) -> list[Change]:
    """Shorter inputs (every dimension of one size at once), a batch of one, fewer list items, dropped inputs."""
    out: list[Change] = []
    shapes = _shapes(build)
    sizes = sorted({d for _, s in shapes for d in s[1:] if _is_int(d) and d > 2}, reverse=True)
    for size in sizes:
        knob = f"inputs.length{size}"
        rung = _next(knob, _ladder(size, 1), rejected)
        if rung is not None:
            out.append(Change(knob, rung, tuple((("spec", name, "shape", i), rung) for name, s in shapes
                                                for i, d in enumerate(s) if i > 0 and d == size)))
    batch = [(("spec", name, "shape", 0), 1) for name, s in shapes if s and _is_int(s[0]) and s[0] > 1]
    if batch and _next("inputs.batch", [1], rejected) is not None:
        out.append(Change("inputs.batch", 1, tuple(batch)))
    spec = build.get("spec") or {}
    for name, item in sorted(spec.items()):
        if isinstance(item, dict) and item.get("kind") == "list" and len(item.get("items") or []) > 1:
            if _next(f"inputs.{name}.items", [1], rejected) is not None:
                out.append(Change(f"inputs.{name}.items", 1, ((("spec", name, "items"), item["items"][:1]),)))
    if len(spec) > 1:
        for name in sorted(spec):
            if _OPTIONAL_INPUT.search(name) and _next(f"inputs.{name}", ["dropped"], rejected) is not None:
                out.append(Change(f"inputs.{name}", "dropped", ((("spec", name), DROP),)))
    return out


def _defaults_change(build: dict[str, Any], rejected: set[str]) -> list[Change]:
    """Every config field that is no size knob, no token id and no sub-config, left to the class default."""
    sets = []
    for path, cfg in _configs(build.get("config") or {}):
        subs = {p[-1] for p, _ in _configs(cfg, path)[1:] if len(p) == len(path) + 1}
        for name in sorted(cfg):
            knob_like = any(p.match(name) for p in (_LAYERS, _DEPTHS, _HEADS, _WIDTH, _COUNTS))
            if not (knob_like or _TOKEN.search(name) or name in _KEEP or name in subs):
                sets.append((path + (name,), DROP))
    if not sets or _next("config.other_fields", ["defaults"], rejected) is None:
        return []
    return [Change("config.other_fields", "defaults", tuple(sets))]


def propose(build: dict[str, Any], rejected: set[str]) -> list[Change]:
    """This pass's changes, the likeliest big savings first; none that was rejected before."""
    return _config_changes(build, rejected) + _input_changes(build, rejected) + _defaults_change(build, rejected)


def apply(build: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
    """A copy of `build` with the changes made (an assignment under a dropped key is skipped)."""
    out = copy.deepcopy(build)
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
    return out


# ---- the search ----------------------------------------------------------------------------------------


@dataclass
class _Search:
    """The state of one shrink: the smallest verified build so far and what was spent."""

    build: dict[str, Any]
    script: str
    result: dict[str, Any]
    started: float
    tries: int = 0
    kept: int = 0
    last_wall: float = 0.0
    stopped: str = "done"       # done | budget | tries


def minimise(built: dict[str, Any], settings: dict[str, Any], backend: str, device: str, python: str,
             signature: str, *, original: tuple[str, dict[str, Any]], budget: float, runner: Runner,
             timeout: float = 600.0, max_tries: int | None = None, clock: Callable[[], float] = time.monotonic,
             progress: Callable[[str], None] | None = None) -> Shrunk:
    """Shrink a confirmed reproducer's build while its script still fails with `signature` on `python`.

    original: the (script, result) that confirmed it. budget: seconds for the whole shrink (a try
    that would overrun it, judged by the last try's duration, is not started). Each try is one
    `runner` call; max_tries caps them.
    """
    s = _Search(built, original[0], original[1], clock())
    s.last_wall = float(original[1].get("seconds") or 0.0)   # the first try is judged by the run that confirmed it
    rejected: set[str] = set()

    def attempt(changes: list[Change]) -> bool | None:
        elapsed = clock() - s.started
        if max_tries is not None and s.tries >= max_tries:
            s.stopped = "tries"
            return None
        if elapsed + s.last_wall > budget or elapsed >= budget:
            s.stopped = "budget"
            return None
        candidate, t0 = apply(s.build, changes), clock()
        if progress:
            progress(f"shrinking {built.get('model')}: try {s.tries + 1} ({s.kept} kept)")
        try:
            script, result = runner(candidate, settings, backend, device, python, min(timeout, budget - elapsed))
        except Exception as exc:      # a candidate the template cannot render is only a rejected one
            script, result = "", {"status": None, "error": f"{type(exc).__name__}: {exc}"}
        s.tries, s.last_wall = s.tries + 1, clock() - t0
        if not reproduces(result, signature):
            return False
        s.build, s.script, s.result, s.kept = candidate, script, result, s.kept + 1
        return True

    while True:
        changes = propose(s.build, rejected)
        queue = [changes] if changes else []
        while queue:
            group = queue.pop(0)
            ok = attempt(group)
            if ok is None:
                return _finish(built, original, s, clock)
            if not ok and len(group) == 1:
                rejected.add(group[0].key)
            elif not ok:
                queue[:0] = [group[:len(group) // 2], group[len(group) // 2:]]
        if not changes:
            return _finish(built, original, s, clock)


# ---- what it shrank ------------------------------------------------------------------------------------


def _leaves(data: Any, path: KeyPath = ()) -> dict[KeyPath, Any]:
    """Flattened {path: value} of a build's config and spec (a list is one value)."""
    if isinstance(data, dict):
        out: dict[KeyPath, Any] = {}
        for key, value in data.items():
            out.update(_leaves(value, path + (key,)))
        return out
    return {path: data}


def _elements(build: dict[str, Any]) -> int:
    total = 0
    for _, shape in _shapes(build):
        n = 1
        for d in shape:
            n *= d if _is_int(d) else 1
        total += n
    return total


def measure(build: dict[str, Any], script: str, result: dict[str, Any]) -> dict[str, Any]:
    """Size of one reproducer: parameters and run seconds (as its script reported), lines, input elements."""
    data = {"config": build.get("config") or {}, "spec": build.get("spec") or {}}
    return {"parameters": result.get("parameters"), "seconds": result.get("seconds"),
            "lines": len(script.splitlines()), "data_lines": len(json.dumps(data, indent=1).splitlines()),
            "input_elements": _elements(build)}


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the shrink changed: [field, from, to] rows, config fields left at defaults, dropped inputs."""
    old = _leaves({"config": before.get("config") or {}, "spec": before.get("spec") or {}})
    new = _leaves({"config": after.get("config") or {}, "spec": after.get("spec") or {}})
    rows, defaulted, dropped = [], 0, set()
    for path, value in old.items():
        if path not in new:
            if path[0] == "spec":
                dropped.add(path[1])
            else:
                defaulted += 1
        elif new[path] != value:
            rows.append([_label(path) if path[0] == "config" else f"{path[1]} {path[-1]}", value, new[path]])
    spec_after = after.get("spec") or {}
    rows.sort(key=lambda row: (not row[0].startswith(tuple(before.get("spec") or ())), 0 if "layer" in row[0] else 1))
    return {"rows": rows, "defaulted": defaulted, "dropped": sorted(n for n in dropped if n not in spec_after)}


def _finish(built: dict[str, Any], original: tuple[str, dict[str, Any]], s: _Search,
            clock: Callable[[], float]) -> Shrunk:
    stats = {"tries": s.tries, "kept": s.kept, "seconds": round(clock() - s.started, 1), "stopped": s.stopped,
             "before": measure(built, *original), "after": measure(s.build, s.script, s.result),
             **changed_fields(built, s.build)}
    return Shrunk(s.build, s.script, stats)


def from_entry(entry: dict[str, Any]) -> Shrunk | None:
    """The shrunk reproducer a cached verdict carries (what component isolation runs on), if any."""
    shrink = entry.get("shrink")
    if not shrink or not shrink.get("build"):
        return None
    return Shrunk(shrink["build"], entry.get("script") or "", shrink.get("stats") or {})
