"""Trace on A, run on B: the calls an item makes after the first, and eager's answers to them (in the worker).

After the first call the same compiled object is called again, once per scenario (harness.core.calls.SCENARIOS):
`second_size` (the second input spec: harness.zoo.second), `hook_added` (a forward hook that scales the output of
the middle submodule eager ran, as steering and adapter tools register one), `weights_updated` (every floating
parameter moved in place by a seeded step, as an optimizer's is: the steps drawn once per group). Each change is made
on the module for its call and undone after it (the hook removed, the parameters copied back bitwise from the other
copy: eager's and the compiled module's restore each other's, no third copy of the weights is held), so the next
config compiles the module as built. Eager's answers come from one deep copy per group (`References`, made once and
shared by every config of the group), after the same change; seeds are reset before every run and inputs cloned for
every call. The fp64 references, made only where a difference is beyond tolerance, are made once per group too.
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

import torch

from harness.core.calls import FIRST, HOOK_SCALE, WEIGHT_SEED_OFFSET, WEIGHT_STEP, Call
from harness.core.correctness import recompile_reason
from harness.engine.accuracy import Fp64, RowsDiffer, Verdict, bitwise, compare, leaves
from harness.core.options import Accuracy
from harness.zoo import second
from harness.zoo.build import SEED, build
from harness.zoo.errors import LockError
from harness.zoo.inputs import make_inputs

REASON_CHARS = 300
# An eager output larger than this is not held for the group: it is made again when a call is judged against it (an
# eager forward costs far less than a compile; four outputs of a 257k-token vocabulary's logits held for the whole
# group, with the compiled ones beside them, passed the worker's memory limit).
HOLD_BYTES = 256 * 2**20
Change = Callable[[torch.nn.Module], ContextManager[None]]


def run(module: Any, inputs: dict[str, Any]) -> Any:
    """One forward on fresh copies of the inputs, seeds reset first (a model that draws numbers draws the same)."""
    torch.manual_seed(SEED)
    with torch.no_grad():
        return module(**clone(inputs))


def output_paths(model: str, device: str) -> list[str]:
    """The names of a model's outputs, as a call names the one that differs (a job: `repro --wrong` checks its
    OUTPUT against them): the model built from the lock, one eager forward."""
    built = build(model, device)
    return [leaf.path for leaf in leaves(run(built.module, built.inputs))]


def parameter_names(model: str, device: str) -> list[str]:
    """The names of a model's parameters, as a train-mode wrong result names a gradient (`grad.<name>`; a job:
    `repro --wrong` checks the name against them): the model built from the lock, nothing run."""
    return [name for name, _ in build(model, device).module.named_parameters()]


def clone(value: Any) -> Any:
    """Tensors copied (a forward that writes into its inputs cannot reach the next call), containers rebuilt."""
    return _map_tensors(value, torch.Tensor.clone)


def to_fp64(value: Any) -> Any:
    """Floating tensors in float64 (the fp64 reference's inputs); the rest as they are."""
    return _map_tensors(value, lambda t: t.double() if t.is_floating_point() else t)


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`value` with `fn` applied to every tensor in it, dicts, lists and tuples rebuilt; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def hooked(name: str) -> Change:
    """A change that registers a forward hook scaling submodule `name`'s output, removed after the call."""
    @contextlib.contextmanager
    def change(module: torch.nn.Module) -> Iterator[None]:
        handle = module.get_submodule(name).register_forward_hook(_scale)
        try:
            yield
        finally:
            handle.remove()
    return change


def _scale(_module: Any, _args: Any, out: torch.Tensor) -> torch.Tensor:
    # Per feature, not one factor: a LayerNorm after the hooked module would undo a uniform scale (or shift).
    return out * torch.linspace(*HOOK_SCALE, out.shape[-1], dtype=out.dtype, device=out.device)


def weights_moved(eager: torch.nn.Module, built: torch.nn.Module) -> Change:
    """A change that steps every floating parameter in place by a seeded delta, the same on every copy of the module
    (drawn from one seed in the parameters' order, in float32 on the CPU, then cast to each copy's parameter; drawn
    again for each call rather than held: the draws are as large as the weights). No copy of the weights is saved:
    `eager` and `built` hold the same weights bitwise and are never moved at once, so each is restored from the
    other; any other target (the fp64 run's copy, made for that run alone) is not restored."""
    names = [n for n, p in eager.named_parameters() if p.is_floating_point()]
    moved: set[int] = set()

    @contextlib.contextmanager
    def change(target: torch.nn.Module) -> Iterator[None]:
        gen = torch.Generator().manual_seed(SEED + WEIGHT_SEED_OFFSET)
        twin = built if target is eager else eager if target is built else None
        if twin is not None and id(twin) in moved:
            raise RuntimeError("the weight step is undone from the other copy: both cannot be moved at once")
        params = dict(target.named_parameters())
        moved.add(id(target))
        try:
            with torch.no_grad():
                for n in names:
                    # the fp64 copy takes the very same step: the float32 draw cast before scaling
                    params[n].add_(torch.randn(params[n].shape, generator=gen).to(params[n]) * WEIGHT_STEP)
            yield
        finally:
            moved.discard(id(target))
            if twin is not None:
                with torch.no_grad():
                    for n, p in twin.named_parameters():
                        if n in params:
                            params[n].copy_(p)
    return change


def double_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 deep copy of `module`, each floating parameter and buffer copied straight to float64 (a float32
    copy converted after would hold both at once: three times the weights)."""
    memo: dict[int, Any] = {}
    for p in module.parameters():
        if p.is_floating_point():
            memo[id(p)] = type(p)(p.detach().double(), p.requires_grad)
    for b in module.buffers():
        if b.is_floating_point():
            memo[id(b)] = b.detach().double()
    return copy.deepcopy(module, memo).double()


@dataclass
class Step:
    """One later call: its scenario, its inputs and change, or why it is not made."""

    scenario: str
    inputs: dict[str, Any] | None = None
    change: Change | None = None
    reason: str | None = None


class References:
    """Eager's outputs for every call of a group, from its own deep copy of the built module, made once."""

    def __init__(self, model: str, built: Any, device: str, accuracy: Accuracy):
        self.accuracy, self.device = accuracy, device
        self.inputs = built.inputs
        self.eager = copy.deepcopy(built.module)   # before any compile: nothing Dynamo did can reach it
        self.outputs: dict[str, Any] = {}
        self.made_again: set[str] = set()      # the later calls whose eager output is too large to hold
        self.second_spec: dict | None = None   # the second input spec the second_size call uses (kept with the build)
        first = run(self.eager, self.inputs)
        called = _recording(self.eager)
        self.nondeterministic = _disagreement(first, run(self.eager, self.inputs))   # not held past the check
        called.close()
        self.first = first if _held(first) else None   # None: made again for each judgement
        del first
        self.steps = [self._second(model, built), self._hook(called.names),
                      Step("weights_updated", built.inputs, weights_moved(self.eager, built.module))]
        for step in self.steps:
            self._answer(step)
        self._fp64: dict[str, Any] = {}   # each call's fp64 output (or its failure), where small enough to hold
        self._fp64_refs: dict[str, Fp64] = {}   # each call's fp64 reference as the oracle asks it (eager's errors kept)
        self.fp64_runs = 0

    def _second(self, model: str, built: Any) -> Step:
        """The second size: the sealed spec or the rule's candidates, the first that runs in eager."""
        if not built.spec:
            return Step("second_size", reason="no input spec to derive a second size from")
        try:
            candidates = second.candidates(model, built.spec)
        except LockError as exc:   # a corrupt second spec: named, and only this call lost
            return Step("second_size", reason=str(exc)[:REASON_CHARS])
        found, why = second.first_that_runs(candidates, self._eager_at)
        if found is None:
            return Step("second_size", reason=why)
        self.second_spec = found
        return Step("second_size", make_inputs(found, SEED, self.device))

    def _eager_at(self, spec: dict) -> None:
        """Eager's output at a candidate second spec (raises when the model does not take that size)."""
        self._keep("second_size", run(self.eager, make_inputs(spec, SEED, self.device)))

    def _keep(self, scenario: str, output: Any) -> None:
        """Hold a later call's eager output for the group, unless it is too large to (then it is made again)."""
        if _held(output):
            self.outputs[scenario] = output
        else:
            self.made_again.add(scenario)

    def _hook(self, called: list[str]) -> Step:
        if not called:
            return Step("hook_added", reason="no submodule with a floating tensor output ran")
        return Step("hook_added", self.inputs, hooked(called[len(called) // 2]))

    def _answer(self, step: Step) -> None:
        """Eager's output for a step (a failure makes the step one not made, with why)."""
        if step.inputs is None or step.scenario in self.outputs or step.scenario in self.made_again:
            return
        try:
            with step.change(self.eager) if step.change else contextlib.nullcontext():
                self._keep(step.scenario, run(self.eager, step.inputs))
        except Exception as exc:
            step.inputs, step.reason = None, f"eager fails after the change: {type(exc).__name__}: {str(exc)[:200]}"

    def fp64(self, step: Step | None) -> Any:
        """Eager's output for a call (None: the first) from a float64 copy, after the same change: run the first
        time a config's output needs it, then kept for the group's other configs where small enough (a failure
        too, raised again); a large one is run again only where eager's kept error does not settle a verdict."""
        key = FIRST if step is None else step.scenario
        if key in self._fp64:
            found = self._fp64[key]
        else:
            try:
                found = self._fp64_run(step)
            except Exception as exc:
                found = exc.with_traceback(None)   # its frames need not live on
            if isinstance(found, Exception) or _held(found):
                self._fp64[key] = found
        if isinstance(found, Exception):
            raise found
        return found

    def _fp64_run(self, step: Step | None) -> Any:
        self.fp64_runs += 1
        # A float64 copy for this run only: held through the group, it would sit beside every later compile (twice
        # the weights in float64), for at most four runs a group.
        module = double_copy(self.eager)
        inputs = to_fp64(self.inputs if step is None else step.inputs)
        with step.change(module) if step and step.change else contextlib.nullcontext():
            return run(module, inputs)

    def _fp64_rows(self, step: Step | None) -> Iterator[tuple[Any, Any]]:
        """A large output's fp64 reference one batch row at a time: (fp64's output, eager's) for each row's inputs
        alone, so no float64 copy of the whole output exists; RowsDiffer where the inputs have no batch to cut."""
        inputs = self.inputs if step is None else step.inputs
        batch = _batch(inputs)
        if batch is None:
            raise RowsDiffer("the inputs have no batch rows to cut")
        self.fp64_runs += 1
        module = double_copy(self.eager)
        with step.change(module) if step and step.change else contextlib.nullcontext():
            for i in range(batch):
                row = _row(inputs, i, batch)
                with step.change(self.eager) if step and step.change else contextlib.nullcontext():
                    eager = run(self.eager, row)   # first: the smaller output is the one held through the other run
                fp64 = run(module, to_fp64(row))
                yield fp64, eager
                del fp64, eager

    def _reference(self, step: Step | None) -> Any:
        """Eager's output for a call (None: the first): held, or made again."""
        if step is None:
            return self.first if self.first is not None else run(self.eager, self.inputs)
        if step.scenario in self.outputs:
            return self.outputs[step.scenario]
        with step.change(self.eager) if step.change else contextlib.nullcontext():
            return run(self.eager, step.inputs)

    def judge(self, step: Step | None, res: Any) -> Verdict:
        """The compiled output of a call (None: the first) against eager's."""
        if self.nondeterministic is not None:
            return Verdict("eager_nondeterministic", detail=self.nondeterministic)
        key = FIRST if step is None else step.scenario
        large = self.first is None if step is None else step.scenario in self.made_again
        fp64 = self._fp64_refs.setdefault(key, Fp64(lambda: self.fp64(step),
                                                    rows=(lambda: self._fp64_rows(step)) if large else None))
        return compare(self._reference(step), res, rtol=self.accuracy.rtol, atol=self.accuracy.atol, fp64=fp64)


def _batch(inputs: dict[str, Any]) -> int | None:
    """The batch size the inputs share: their tensors' first dimension (None: no tensor, or fewer than two rows)."""
    sizes = {v.shape[0] for v in inputs.values() if isinstance(v, torch.Tensor) and v.ndim}
    return sizes.pop() if len(sizes) == 1 and max(sizes, default=0) > 1 else None


def _row(inputs: dict[str, Any], i: int, batch: int) -> dict[str, Any]:
    """Row `i` of the inputs: each tensor with `batch` rows cut to that row (the batch dimension kept)."""
    return {k: v[i:i + 1] if isinstance(v, torch.Tensor) and v.ndim and v.shape[0] == batch else v
            for k, v in inputs.items()}


def _held(output: Any) -> bool:
    """Whether an output is small enough to hold for the group (HOLD_BYTES)."""
    size = sum(leaf.value.numel() * leaf.value.element_size() for leaf in leaves(output)
               if isinstance(leaf.value, torch.Tensor))
    return size <= HOLD_BYTES


class _recording:
    """The submodules (by name) that return a floating tensor, in the order a forward first calls them."""

    def __init__(self, module: torch.nn.Module):
        self.names: list[str] = []
        self.handles = [sub.register_forward_hook(self._seen(name)) for name, sub in module.named_modules() if name]

    def _seen(self, name: str) -> Callable:
        def hook(_m: Any, _args: Any, out: Any) -> None:
            if isinstance(out, torch.Tensor) and out.is_floating_point() and name not in self.names:
                self.names.append(name)
        return hook

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _disagreement(a: Any, b: Any) -> str | None:
    """Why two eager runs of the same inputs differ (None: bitwise the same)."""
    left, right = list(leaves(a)), list(leaves(b))
    if [x.path for x in left] != [y.path for y in right]:
        return "eager run twice returns different outputs"
    for x, y in zip(left, right):
        if isinstance(x.value, torch.Tensor) and isinstance(y.value, torch.Tensor) and not bitwise(x.value, y.value):
            return f"eager run twice differs at {x.path}"
    return None


class Recorder:
    """Dynamo's compilation metrics since the last mark: recompiled frames, each with its reason."""

    def __init__(self) -> None:
        torch._dynamo.utils.clear_compilation_metrics()   # torch._dynamo.reset() keeps them

    def take(self) -> list[str]:
        """The recompile reasons since the last take, as kept (`correctness.recompile_reason`; the metrics then
        cleared)."""
        reasons = [m.recompile_reason for m in torch._dynamo.utils.get_compilation_metrics() if m.recompile_reason]
        torch._dynamo.utils.clear_compilation_metrics()
        return [recompile_reason(r)[:REASON_CHARS] for r in reasons]


def first_call(output: Any, graphs: int, refs: References, recorder: Recorder) -> Call:
    """The first call (made by the compile: its output), judged against eager's."""
    return _call(FIRST, graphs, recorder.take(), refs.judge(None, output))


def later_call(step: Step, compiled: Callable, graphs: Callable[[], int], module: torch.nn.Module, refs: References,
               recorder: Recorder, error_fields: Callable[[BaseException], dict[str, Any]]) -> Call:
    """One later call on the same compiled object, after its step's change; `graphs()` counts the graphs compiled
    so far. A call that raises is not judged (the next one still runs)."""
    if step.inputs is None:
        return Call(step.scenario, detail=step.reason)
    before = graphs()
    try:
        with step.change(module) if step.change else contextlib.nullcontext():
            res = run(compiled, step.inputs)
        verdict = refs.judge(step, res)
    except Exception as exc:   # the call's own result; the item keeps its first call's status
        found = error_fields(exc)
        return Call(step.scenario, graphs() - before, len(r := recorder.take()), r, "not_judged",
                    detail=f"the call raised {found['error_type']}", error_type=found["error_type"],
                    signature=found["signature"])
    del res   # the compiled output is not held past its verdict
    return _call(step.scenario, graphs() - before, recorder.take(), verdict)


def _call(scenario: str, graphs: int, reasons: list[str], verdict: Verdict) -> Call:
    return Call(scenario, graphs, len(reasons), reasons, verdict.accuracy, verdict.detail, verdict.output,
                list(verdict.metadata))
