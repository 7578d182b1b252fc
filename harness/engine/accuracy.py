"""The accuracy oracle: one call's outputs against eager's, in the worker (DESIGN "Words": accuracy).

PyTorch's benchmark runner (`check_accuracy` over `torch._dynamo.utils.same`) is the model, wrapped rather than
called raw: `same()` compares only `.loss` of a question-answering output, raises on a key mismatch or a cache
object, and its cosine mode ignores scale. So the structure is walked here (keys, types, shapes, dtypes first, every
output named by its path: "logits", "past_key_values[0][1]"), transformers' cache objects by their tensors, and
`same()`'s rule for one tensor is applied here chunk by chunk (`as_close_as_eager`, the rule in its docstring), only
to arbitrate against an fp64 reference as it does: a compiled result beyond rtol/atol is still `close` when it is as
near the fp64 result as eager's is. Eager's distance to the fp64 result is kept per call and output (`Fp64`), so a
group's later configs are judged without running fp64 again wherever that distance settles the rule (`bounded`).
Metadata (requires_grad, inference tensors, strides) is listed apart: it never makes a value wrong.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

METADATA_LIMIT = 8    # metadata differences listed per call (the rest are the same story)
# Values compared per pass over a large output: every elementwise test holds temporaries of one chunk, not of the
# whole output (a 257k-token vocabulary's logits are 0.5 GB in float32, and their float64 difference 1 GB more).
# Small enough that a chunk's float64 temporaries (2 MB) are reused from the allocator's free lists: at 4M values
# each chunk's 32 MB were mapped and faulted in afresh, and one RMSE over those logits took 3.4 s instead of 0.3 s.
CHUNK = 1 << 18
# same()'s looser test where eager has a NaN that neither fp64 nor the compiled result has.
NAN_RESCUE_TOL = 4e-2
# How far past the sums' rounding a bound must clear the threshold to settle a verdict without the fp64 run.
MARGIN = 1e-9
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


@dataclass
class Fp64:
    """One call's fp64 reference, shared by every config of a group: `run()` gives eager's output in float64 (it
    raises where the model refuses float64), and `eager_error` keeps eager's RMSE to it per output path (a float
    each: the reference itself need not be held to settle a later config's verdict)."""

    run: Callable[[], Any]
    eager_error: dict[str, float] = field(default_factory=dict)
    # A large output's fp64 reference one batch row at a time (harness.engine.scenarios.References): each row's
    # (fp64 output, eager's output) in turn, made from that row's inputs alone. None: the whole run only.
    rows: Callable[[], Iterator[tuple[Any, Any]]] | None = None


class RowsDiffer(ValueError):
    """Eager run on one batch row is not its batched output's row (or no row tiles the output): the fp64 reference
    must be made whole."""


def compare(ref: Any, res: Any, *, rtol: float, atol: float, fp64: Fp64 | None = None) -> Verdict:
    """Compiled `res` against eager `ref`: structure, then values; beyond tolerance, `fp64` (eager's run in float64,
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
    """The fp64 output's leaves by path for one comparison, run at most once; None (with why) when there is no fp64
    run; eager's error to it per path as the group has kept it."""

    def __init__(self, fp64: Fp64 | None):
        self.fp64, self.done, self.by_path, self.why = fp64, False, {}, "no fp64 reference"

    def get(self, path: str) -> Any:
        if not self.done and self.fp64 is not None:
            self.done = True
            try:
                self.by_path = {leaf.path: leaf.value for leaf in leaves(self.fp64.run())}
            except Exception as exc:   # some models refuse float64 (a float32 mask, a dtype check): no arbitration
                self.why = f"the fp64 reference failed: {type(exc).__name__}: {str(exc)[:120]}"
        return self.by_path.get(path)

    def rows(self, path: str) -> Iterator[tuple[Any, Any]] | None:
        """(fp64's value, eager's value) at `path`, one batch row at a time, where the reference offers rows (None:
        only whole); the row run is closed with the iterator (its changes undone)."""
        if self.fp64 is None or self.fp64.rows is None:
            return None
        return _at(self.fp64.rows(), path)

    def known(self, path: str) -> float | None:
        """Eager's RMSE to the fp64 output at `path`, where a config of the group has measured it."""
        return self.fp64.eager_error.get(path) if self.fp64 is not None else None

    def remember(self, path: str, eager_error: float) -> None:
        if self.fp64 is not None:
            self.fp64.eager_error[path] = eager_error


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
    if _allclose(y, x, rtol, atol):
        return Verdict("close", a.path, _diff(x, y))
    return _arbitrate(a.path, x, y, rtol, atol, reference)


def _arbitrate(path: str, x: torch.Tensor, y: torch.Tensor, rtol: float, atol: float, reference: _Lazy) -> Verdict:
    """Beyond tolerance: same()'s rule at tol = atol (as_close_as_eager), settled from eager's kept error alone where
    `bounded` can, else against the fp64 run (whose eager error is then kept for the group's other configs)."""
    if _allclose(x, y, atol, atol):   # same()'s own first test, at tol both ways (eager first, as it asks)
        return _arbitrated(path, x, y, True, None)
    known = reference.known(path)
    if known is not None:
        settled = bounded(_rms(x, y), known, _multiplier(x, atol), atol)
        if settled is not None:
            return _arbitrated(path, x, y, settled, known)
    found = _by_rows(path, x, y, atol, reference)
    if found is None:
        fp64 = reference.get(path)
        if not isinstance(fp64, torch.Tensor) or fp64.shape != x.shape:
            return Verdict("not_judged", path, f"{_diff(x, y)} beyond rtol {rtol:g}, atol {atol:g}; {reference.why}")
        found = as_close_as_eager(x, y, fp64.detach().cpu(), atol)
    passes, eager_error = found
    reference.remember(path, eager_error)
    return _arbitrated(path, x, y, passes, eager_error)


def _at(rows: Iterator[tuple[Any, Any]], path: str) -> Iterator[tuple[Any, Any]]:
    with contextlib.closing(rows):   # type: ignore[type-var]
        for fp64, eager in rows:
            values = _value_at(fp64, path), _value_at(eager, path)
            del fp64, eager   # the rest of the row's outputs
            yield values
            del values        # before the next row is made


def _value_at(out: Any, path: str) -> Any:
    return next((leaf.value for leaf in leaves(out) if leaf.path == path), None)


def _by_rows(path: str, x: torch.Tensor, y: torch.Tensor, tol: float,
             reference: _Lazy) -> tuple[bool, float] | None:
    """as_close_as_eager against the fp64 reference made one batch row at a time (each row's fp64 output released
    before the next is made: no float64 copy of the whole output exists); None where it is not offered or cannot be
    used (a value without a row per batch row, rows that are not the batched output's, a model that refuses float64):
    then the whole reference is made (and its failure, if any, named)."""
    rows = reference.rows(path) if x.ndim else None
    if rows is None:
        return None
    try:
        with contextlib.closing(rows):   # type: ignore[type-var]
            return as_close_as_eager(x, y, _row_pieces(rows, x, y, tol), tol)
    except Exception:   # RowsDiffer, the fp64 run's own failure: the whole run decides (and names a failure)
        return None


def _row_pieces(rows: Iterator[tuple[Any, Any]], x: torch.Tensor, y: torch.Tensor,
                tol: float) -> Iterator[tuple[torch.Tensor, ...]]:
    """(fp64 rows, eager's rows, compiled rows) in batch order; RowsDiffer where the rows do not tile `x`, or where
    eager's own run on a row is not within `tol` of its batched output's row (a model whose rows see each other)."""
    start = 0
    for fp64, eager in rows:
        if not isinstance(fp64, torch.Tensor) or not isinstance(eager, torch.Tensor) or fp64.ndim != x.ndim or \
                fp64.shape[1:] != x.shape[1:] or eager.shape != fp64.shape:
            raise RowsDiffer("a row's output is not a row of the batched one")
        n = fp64.shape[0]
        if not _allclose(eager.detach().cpu(), x[start:start + n], tol, tol):
            raise RowsDiffer("eager's row is not its batched output's row")
        piece = fp64.detach().cpu(), x[start:start + n], y[start:start + n]
        del fp64, eager   # a row is held only while it is compared: none past the next row's making
        yield piece
        del piece
        start += n
    if start != x.shape[0]:
        raise RowsDiffer("the rows do not cover the output")


def _arbitrated(path: str, x: torch.Tensor, y: torch.Tensor, passes: bool, eager_error: float | None) -> Verdict:
    """The verdict of the fp64 rule, in the same words whichever way it was settled."""
    if passes:
        return Verdict("close", path, f"{_diff(x, y)}; as close to fp64 as eager")
    return Verdict("wrong", path, f"{_diff(x, y)}; rmse {_rms(x, y):.2e} to eager, eager's to fp64 {eager_error:.2e}")


def as_close_as_eager(ref: torch.Tensor, res: torch.Tensor, fp64: torch.Tensor | list[tuple[torch.Tensor, ...]],
                      tol: float) -> tuple[bool, float]:
    """torch._dynamo.utils.same()'s verdict on one floating tensor against its fp64 reference (equal_nan, the rest
    its defaults), and eager's error; computed chunk by chunk, never a float64 copy of the whole tensor (`fp64` may
    come in pieces: (fp64 rows, ref's rows, res's rows), the batch rows in order):
    1. `allclose(ref, res)` at rtol = atol = tol: passes;
    2. the reference not float64: fails;
    3. `ref` has a NaN where neither the reference nor `res` has one, and `res` is within 0.04 (both ways) of the
       reference cast to its dtype: passes;
    4. res_error = RMSE(fp64, res), ref_error = RMSE(fp64, ref), in float64: passes when
       res_error <= multiplier * ref_error + tol / 10 (multiplier: `_multiplier`);
    5. both errors NaN: passes.
    Each sum is a float64 sum per chunk, the chunks' sums added: a verdict can differ from same()'s only where
    res_error is within rounding of the threshold. (same()'s testing knob `inject_relu_bug_TESTING_ONLY` is not
    read.)"""
    pieces = [(fp64, ref, res)] if isinstance(fp64, torch.Tensor) else fp64   # consumed once, piece by piece
    close = _allclose(ref, res, tol, tol)
    rescue_asked = not close and _any_nan(ref) and not _any_nan(res)
    wide, nan_fp64, rescue, sq_ref, sq_res = True, False, True, 0.0, 0.0
    pieces = iter(pieces)
    while (piece := next(pieces, None)) is not None:   # not a for loop: its names would hold a row past the next
        f, a, b = piece
        del piece
        if f.dtype != torch.float64:
            wide = False
            break
        sq_ref += _squares(f, a)
        if not close:
            sq_res += _squares(f, b)
        if rescue_asked:
            nan_fp64 = nan_fp64 or _any_nan(f)
            rescue = rescue and _allclose(f, b, NAN_RESCUE_TOL, NAN_RESCUE_TOL, cast=True)
        del f, a, b
    n = ref.numel()
    if not wide:
        return close, math.nan
    ref_error = math.sqrt(sq_ref / n) if n else math.nan
    if close:
        return True, ref_error
    res_error = math.sqrt(sq_res / n) if n else math.nan
    if rescue_asked and not nan_fp64 and rescue:   # same(): res is better than ref where ref has a NaN
        return True, ref_error
    passes = res_error <= _multiplier(ref, tol) * ref_error + tol / 10
    return passes or (math.isnan(ref_error) and math.isnan(res_error)), ref_error


def bounded(distance: float, eager_error: float, multiplier: float, tol: float) -> bool | None:
    """The fp64 rule's verdict (step 4 of as_close_as_eager) from RMSE(ref, res) and RMSE(fp64, ref) alone, where
    they settle it: RMSE is a norm, so RMSE(fp64, res) lies within distance ± eager_error. Passes when
    distance + eager_error is within the threshold, fails when distance - eager_error is beyond it (each by MARGIN,
    past the sums' rounding); None between, and where either is not finite (NaNs and infinities take the full rule)."""
    if not (math.isfinite(distance) and math.isfinite(eager_error)):
        return None
    threshold = multiplier * eager_error + tol / 10
    if (distance + eager_error) * (1 + MARGIN) <= threshold:
        return True
    if distance - eager_error > threshold * (1 + MARGIN):
        return False
    return None


def _multiplier(ref: torch.Tensor, tol: float) -> float:
    """same()'s multiplier of eager's error: 2, or 3 for half precision, small tensors (fewer than 1000 values), a
    4-d tensor ending in 1x1, or a loose tol (0.02 or more): noise dominates the error there."""
    if ref.dtype in (torch.float16, torch.bfloat16):
        return 3.0
    if ref.numel() < 1000 or (ref.ndim == 4 and ref.shape[-1] == ref.shape[-2] == 1) or tol >= 2e-2:
        return 3.0
    return 2.0


def _allclose(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float, *, cast: bool = False) -> bool:
    """`torch.allclose(a, b)` (rtol is relative to b) with NaNs equal, chunk by chunk (`cast`: a cast to b's dtype)."""
    return all(torch.allclose(ca.to(cb.dtype) if cast else ca, cb, rtol=rtol, atol=atol, equal_nan=True)
               for ca, cb in _chunks(a, b))


def _rms(x: torch.Tensor, y: torch.Tensor) -> float:
    """RMSE between two tensors in float64 (complex128 for complex ones), chunk by chunk (NaN where either has one)."""
    return math.sqrt(_squares(x, y) / x.numel()) if x.numel() else math.nan


def _squares(x: torch.Tensor, y: torch.Tensor) -> float:
    """The sum of squared differences in float64, chunk by chunk: each chunk's sum, the sums added."""
    return sum(float(torch.linalg.vector_norm(_wide(cx) - _wide(cy))) ** 2 for cx, cy in _chunks(x, y))


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128) if t.is_complex() else t.double()


def _any_nan(x: torch.Tensor) -> bool:
    return any(bool(c.isnan().any()) for (c,) in _chunks(x))


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


def _chunks(*tensors: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    """Same-shaped tensors' values in flat chunks of CHUNK, side by side (views, where the tensors are contiguous)."""
    flat = [t.reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), CHUNK):
        yield tuple(f[start:start + CHUNK] for f in flat)


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
