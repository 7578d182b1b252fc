"""The accuracy oracle: one call's outputs against eager's, in the worker (DESIGN "Words": accuracy).

PyTorch's benchmark runner (`check_accuracy` over `torch._dynamo.utils.same`) is the model, wrapped rather than
called raw: `same()` compares only `.loss` of a question-answering output, raises on a key mismatch or a cache
object, and its cosine mode ignores scale. So the structure is walked here (keys, types, shapes, dtypes first, every
output named by its path: "logits", "past_key_values[0][1]"), transformers' cache objects by their tensors, and
`same()` is asked about one tensor at a time, only to arbitrate against an fp64 reference as it does: a compiled
result beyond rtol/atol is still `close` when it is as near the fp64 result as eager's is.
Metadata (requires_grad, inference tensors, strides) is listed apart: it never makes a value wrong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

METADATA_LIMIT = 8    # metadata differences listed per call (the rest are the same story)
# Values compared per pass over a large output: every elementwise test holds temporaries of one chunk, not of the
# whole output (a 257k-token vocabulary's logits are 0.5 GB in float32, and their float64 difference 1 GB more).
CHUNK = 1 << 22
# Which leaf's verdict the call takes: the worst; a wrong value outranks one that could not be judged.
_ORDER = {"exact": 0, "close": 1, "not_judged": 2, "wrong": 3}


@dataclass(frozen=True)
class Verdict:
    """How one output compares: exact, close, wrong or not_judged; the first output that differs and by how much."""

    accuracy: str
    output: str | None = None
    detail: str | None = None
    metadata: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Leaf:
    """One value of an output at its path; `skipped`: why it is not compared (a cache without tensors)."""

    path: str
    value: Any
    skipped: str | None = None


def leaves(out: Any, path: str = "") -> Iterator[Leaf]:
    """Every value of an output, depth first: mappings (ModelOutput) by key, sequences by index, caches by their
    layers' key and value tensors."""
    if isinstance(out, dict):
        for key, value in out.items():
            yield from leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(out, (list, tuple)):
        for i, value in enumerate(out):
            yield from leaves(value, f"{path}[{i}]")
    elif _is_cache(out):
        yield from _cache_leaves(out, path or "cache")
    else:
        yield Leaf(path or "output", out)


def _is_cache(value: Any) -> bool:
    """A transformers cache object (DynamicCache, EncoderDecoderCache...): named by its class, as no import of
    transformers' cache classes is stable across releases."""
    return any(cls.__name__.endswith("Cache") for cls in type(value).__mro__)


def _cache_leaves(cache: Any, path: str) -> Iterator[Leaf]:
    # An encoder-decoder cache holds two caches; a cache of layers holds keys and values per layer (5.x).
    if hasattr(cache, "self_attention_cache") and hasattr(cache, "cross_attention_cache"):
        yield from _cache_leaves(cache.self_attention_cache, f"{path}.self_attention_cache")
        yield from _cache_leaves(cache.cross_attention_cache, f"{path}.cross_attention_cache")
        return
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        yield Leaf(path, None, skipped=f"a {type(cache).__name__} without layers is not compared")
        return
    for i, layer in enumerate(layers):
        for j, name in enumerate(("keys", "values")):
            tensor = getattr(layer, name, None)
            if isinstance(tensor, torch.Tensor):
                yield Leaf(f"{path}[{i}][{j}]", tensor)


def compare(ref: Any, res: Any, *, rtol: float, atol: float, fp64: Callable[[], Any] | None = None) -> Verdict:
    """Compiled `res` against eager `ref`: structure, then values; beyond tolerance, `fp64()` (eager's run in float64,
    made only when needed; None: bitwise only) arbitrates. The verdict names the first output that is wrong; the values
after it are not compared (their metadata still is listed)."""
    refs, ress = list(leaves(ref)), list(leaves(res))
    mismatch = _structure(refs, ress)
    if mismatch is not None:
        return Verdict("wrong", mismatch[0], mismatch[1])
    worst, metadata, reference = Verdict("exact"), [], _Lazy(fp64)
    for a, b in zip(refs, ress):
        metadata += _metadata(a, b)
        if worst.accuracy == "wrong":   # the worst there is, and the first wrong is the one named: nothing changes it
            continue
        verdict = _leaf(a, b, rtol, atol, reference)
        if _ORDER[verdict.accuracy] > _ORDER[worst.accuracy]:
            worst = verdict
    return Verdict(worst.accuracy, worst.output, worst.detail, metadata[:METADATA_LIMIT])


class _Lazy:
    """The fp64 output's leaves by path, computed at most once; None (with why) when there is no fp64 run."""

    def __init__(self, make: Callable[[], Any] | None):
        self.make, self.done, self.by_path, self.why = make, False, {}, "no fp64 reference"

    def get(self, path: str) -> Any:
        if not self.done and self.make is not None:
            self.done = True
            try:
                self.by_path = {leaf.path: leaf.value for leaf in leaves(self.make())}
            except Exception as exc:   # some models refuse float64 (a float32 mask, a dtype check): no arbitration
                self.why = f"the fp64 reference failed: {type(exc).__name__}: {str(exc)[:120]}"
        return self.by_path.get(path)


def _structure(refs: list[Leaf], ress: list[Leaf]) -> tuple[str, str] | None:
    """(output, why) for the first structural difference: paths, types, shapes, dtypes."""
    if [a.path for a in refs] != [b.path for b in ress]:
        missing = sorted({a.path for a in refs} ^ {b.path for b in ress}) or [refs[0].path if refs else "output"]
        return missing[0], f"outputs differ: eager has {len(refs)}, compiled {len(ress)}; first not in both: {missing[0]}"
    for a, b in zip(refs, ress):
        if isinstance(a.value, torch.Tensor) != isinstance(b.value, torch.Tensor):
            return a.path, f"type {type(a.value).__name__} in eager, {type(b.value).__name__} compiled"
        if isinstance(a.value, torch.Tensor):
            if a.value.shape != b.value.shape:
                return a.path, f"shape {tuple(a.value.shape)} in eager, {tuple(b.value.shape)} compiled"
            if a.value.dtype != b.value.dtype:
                return a.path, f"dtype {a.value.dtype} in eager, {b.value.dtype} compiled"
    return None


def _metadata(a: Leaf, b: Leaf) -> list[str]:
    """What differs beyond the values (never a wrong result): requires_grad, inference mode, strides."""
    if a.skipped or b.skipped:
        return [f"{a.path}: not compared: {a.skipped or b.skipped}"]
    x, y = a.value, b.value
    if not isinstance(x, torch.Tensor):
        return []
    found = []
    for what in ("requires_grad", "is_inference"):
        ex, ey = (x.requires_grad, y.requires_grad) if what == "requires_grad" else (x.is_inference(), y.is_inference())
        if ex != ey:
            found.append(f"{a.path}: {what} {ex} in eager, {ey} compiled")
    if x.numel() > 1 and x.stride() != y.stride():
        found.append(f"{a.path}: strides {x.stride()} in eager, {y.stride()} compiled")
    return found


def _leaf(a: Leaf, b: Leaf, rtol: float, atol: float, reference: _Lazy) -> Verdict:
    """One value: exact, close (within tolerance or fp64-arbitrated), wrong, or not_judged (skipped, no fp64)."""
    if a.skipped or b.skipped:   # listed with the metadata: a cache we cannot read says nothing about the values
        return Verdict("exact")
    x, y = a.value, b.value
    if not isinstance(x, torch.Tensor):
        if _same_scalar(x, y):
            return Verdict("exact")
        return Verdict("wrong", a.path, f"{x!r} in eager, {y!r} compiled")
    if bitwise(x, y):
        return Verdict("exact")
    x, y = x.detach().cpu(), y.detach().cpu()
    if not x.is_floating_point() and not x.is_complex():
        return _arbitrate_exact(a.path, x, y, reference)
    if all(torch.allclose(cy, cx, rtol=rtol, atol=atol, equal_nan=True) for cx, cy in _chunks(x, y)):
        return Verdict("close", a.path, _diff(x, y))
    fp64 = reference.get(a.path)
    if not isinstance(fp64, torch.Tensor) or fp64.shape != x.shape:
        return Verdict("not_judged", a.path, f"{_diff(x, y)} beyond rtol {rtol:g}, atol {atol:g}; {reference.why}")
    # same() on one tensor: allclose at tol, then RMSE against fp64 (res within a multiplier of eager's error).
    if torch._dynamo.utils.same(x, y, fp64.detach().cpu(), tol=atol, equal_nan=True, log_error=_quiet):
        return Verdict("close", a.path, f"{_diff(x, y)}; as close to fp64 as eager")
    return Verdict("wrong", a.path, f"{_diff(x, y)}; rmse to fp64 {_rmse(fp64, y):.2e}, eager's {_rmse(fp64, x):.2e}")


def _arbitrate_exact(path: str, x: torch.Tensor, y: torch.Tensor, reference: _Lazy) -> Verdict:
    """Integer or boolean outputs (argmax ids, masks) have no tolerance: a difference is wrong unless eager's own
    differs from the fp64 run's (then eager's is one rounding away too, and neither is the right one)."""
    fp64 = reference.get(path)
    changed = int((x != y).sum())
    if isinstance(fp64, torch.Tensor) and fp64.shape == x.shape and not bitwise(x, fp64.detach().cpu().to(x.dtype)):
        return Verdict("close", path, f"{changed} of {x.numel()} values differ; eager differs from fp64 too")
    return Verdict("wrong", path, f"{changed} of {x.numel()} values differ (first at {_first_index(x != y)})")


def bitwise(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Equal in every value, NaNs in the same places counted equal."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.device != y.device:
        y = y.to(x.device)
    if torch.equal(x, y):   # one pass; False on a NaN, which the elementwise test below counts equal to a NaN
        return True
    if not (x.is_floating_point() or x.is_complex()):
        return False
    return all(bool(((cx == cy) | (cx.isnan() & cy.isnan())).all()) for cx, cy in _chunks(x, y))


def _chunks(x: torch.Tensor, y: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The two tensors' values in flat chunks of CHUNK, side by side (views, where the tensors are contiguous)."""
    fx, fy = x.reshape(-1), y.reshape(-1)
    for start in range(0, fx.numel(), CHUNK):
        yield fx[start:start + CHUNK], fy[start:start + CHUNK]


def _same_scalar(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (math.isnan(x) and math.isnan(y))
    return type(x) is type(y) and x == y


def _diff(x: torch.Tensor, y: torch.Tensor) -> str:
    """The largest absolute difference, its relative size and where (chunk by chunk, in float64)."""
    where, worst, offset = 0, -1.0, 0
    for a, b in _chunks(x, y):
        delta = (a.double() - b.double()).abs().nan_to_num(nan=math.inf)
        if delta.numel() and float(delta.max()) > worst:
            where, worst = offset + int(delta.argmax()), float(delta.max())
        offset += a.numel()
    worst = max(worst, 0.0)
    rel = worst / max(abs(float(x.reshape(-1)[where].double())), 1e-12) if x.numel() else 0.0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(where), x.shape)) if x.dim() else ()
    return f"max abs diff {worst:.2e} (rel {rel:.2e}) at {index}"


def _first_index(mask: torch.Tensor) -> tuple[int, ...]:
    hits = mask.nonzero()
    return tuple(int(i) for i in hits[0]) if len(hits) else ()


def _rmse(ref: torch.Tensor, res: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(ref.detach().cpu().double() - res.detach().cpu().double()))))


def _quiet(*args: Any, **kwargs: Any) -> None:
    """same() logs every failure as an error; here a failure is a verdict, not a log line."""
