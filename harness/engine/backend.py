"""The counting backend and one measured compile: runs inside a worker, never in the parent.

Dynamo hands each captured graph to its backend; the graphs it then installs are the graph count. With
--backend eager|aot_eager|inductor the counter wraps the real backend, so the numbers stay comparable while the
graphs really get compiled. A backend call is not always an installed graph: AOTAutograd (aot_eager, inductor) may
ask Dynamo to trace the frame again (`TensorifyScalarRestartAnalysis`, when a float it traced as a symbol has to be
specialized: BertModel or GPT2Model with `assume_static_by_default = False`), and Dynamo then throws that graph away
and hands over the one it installs. Such a graph is counted apart (`CompileStats.discarded`), never as a graph:
`count` and `eager` never restart there, and the four backends must agree on the count.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from harness.core.modes import DEFAULT, Mode
from harness.engine import in_mode
from harness.engine.configs import split_key
from harness.engine.gbregistry import reason_id

log = logging.getLogger(__name__)

# FX node kinds that are real work; placeholders, get_attr and output are plumbing.
_OP_KINDS = ("call_function", "call_method", "call_module")


@dataclass(frozen=True, eq=False)   # each graph is itself: two alike are still two
class Graph:
    """One graph Dynamo handed to the backend, and the compile (and attempt of it) that traced it."""

    compile_id: str     # "frame/compile": a frame compiled again has a new id
    attempt: int        # Dynamo's analysis of that compile, 0 first; a restart traces the frame again
    ops: int
    code: str           # its code (FX's readable Python), hashed


@dataclass
class CompileStats:
    """What the counting backend saw during one compile: the graphs Dynamo installed (`graphs`, `ops_per_graph`,
    `codes` are theirs) and, apart, those it threw away when its analysis restarted (`discarded`)."""

    installed: list[Graph] = field(default_factory=list)
    discarded: list[Graph] = field(default_factory=list)
    compile_ids: set[str] = field(default_factory=set)
    recompiles: int = 0
    backward_graphs: int = 0            # in train: the backward graphs AOTAutograd compiled

    @property
    def graphs(self) -> int:
        """The graph count: graphs Dynamo installed."""
        return len(self.installed)

    @property
    def ops_per_graph(self) -> list[int]:
        """Each installed graph's ops."""
        return [g.ops for g in self.installed]

    @property
    def codes(self) -> list[str]:
        """Each installed graph's code, hashed."""
        return [g.code for g in self.installed]

    def add(self, graph: Graph) -> None:
        """A graph handed to the backend; one of an earlier attempt of its compile was thrown away by the restart."""
        stale = [g for g in self.installed if g.compile_id == graph.compile_id and g.attempt < graph.attempt]
        self.throw_away(*stale)
        self.installed.append(graph)

    def throw_away(self, *graphs: Graph) -> None:
        """Graphs Dynamo did not install (its analysis restarted): counted apart, never as graphs."""
        for graph in graphs:
            self.installed.remove(graph)
            self.discarded.append(graph)
            log.debug("compile %s attempt %d: Dynamo restarted its analysis; its graph of %d ops is not counted",
                      graph.compile_id, graph.attempt, graph.ops)


def counting_backend(stats: CompileStats, inner: str = "count", train: bool = False) -> Callable:
    """A Dynamo backend that records each graph, then hands it to `inner` (or runs it as is); `train`: the backward
    is compiled too and its graphs counted (`backward_graphs`)."""
    real = None if inner == "count" else torch._dynamo.lookup_backend(inner)
    if train:
        real = _backward_counting(stats, inner)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        # TraceId(CompileId(frame_id, frame_compile_id), attempt): a frame compiled again (frame_compile_id > 0)
        # is a recompile; several graphs of one compile (graph breaks) share one id; attempt > 0 is a restart.
        trace = torch._guards.CompileContext.current_trace_id()
        cid = trace.compile_id if trace is not None else None
        graph = Graph(str(cid), trace.attempt if trace is not None else 0,
                      sum(1 for n in gm.graph.nodes if n.op in _OP_KINDS), _digest(gm.code))
        stats.add(graph)
        if cid is not None and graph.compile_id not in stats.compile_ids:
            stats.compile_ids.add(graph.compile_id)
            if getattr(cid, "frame_compile_id", 0):
                stats.recompiles += 1
        if real is None:
            return gm.forward
        try:
            return real(gm, example_inputs)
        except torch._dynamo.exc.RestartAnalysis:
            stats.throw_away(graph)     # Dynamo traces the frame again and hands over the graph it installs
            raise

    return backend


def _backward_counting(stats: CompileStats, inner: str) -> Callable:
    """In train, the graph goes through AOTAutograd, which splits it into a forward and a backward graph: under
    inductor each is Inductor's (its `inner_compile` sees which), under count, eager and aot_eager each runs as
    traced (aot_eager's nop compilers), so the backward is compiled under every backend and counted alike."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    if inner == "inductor":
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        def inner_compile(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Callable:
            stats.backward_graphs += bool(kwargs.get("is_backward"))
            return compile_fx_inner(gm, example_inputs, **kwargs)
        return lambda gm, example_inputs: compile_fx(gm, example_inputs, inner_compile=inner_compile)

    def forward(gm: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable:
        return make_boxed_func(gm.forward)

    def backward(gm: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable:
        stats.backward_graphs += 1
        return make_boxed_func(gm.forward)
    return aot_autograd(fw_compiler=forward, bw_compiler=backward)


@contextlib.contextmanager
def patched(settings: dict[str, Any]) -> Iterator[None]:
    """Apply {"torch._dynamo.config.x": v, ...} with each module's own config.patch."""
    by_module: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        module, attr = split_key(key)
        by_module.setdefault(module, {})[attr] = value
    with contextlib.ExitStack() as stack:
        for module, changes in by_module.items():
            stack.enter_context(importlib.import_module(module).patch(changes))
        yield


def reset_dynamo() -> None:
    """Forget every compiled frame and every counter, so one compile cannot leak into the next."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


def break_reasons() -> list[str]:
    """Graph-break reasons Dynamo counted since the last reset, most frequent first."""
    counter = torch._dynamo.utils.counters.get("graph_break") or {}
    return [reason for reason, _ in sorted(counter.items(), key=lambda kv: -kv[1])]


def graph_break_count() -> int:
    counter = torch._dynamo.utils.counters.get("graph_break") or {}
    return int(sum(counter.values()))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Guards on the builtins (`len`, `getattr`...) are installed by a worker's first compile only (Dynamo keeps the
# builtins dict's source for the process): compile order, not a flag. They are left out of the digest, so the
# baseline (compiled first) and a later config are compared on what a flag can change.
BUILTINS_GUARD = "G['__builtins_dict___"


def guards_digest() -> str | None:
    """Dynamo's guards over every frame compiled since the last reset, in compile order, as one digest of their code
    (None where this torch does not expose them: nothing can then be proved equal). A flag can change what a later
    call does through the guards alone (what makes it recompile), so two compiles are the same only when these are;
    the objects guarded by id are the group's own, the same under every config of a worker."""
    try:
        from torch._dynamo.convert_frame import input_codes
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:
        return None
    parts = []
    for ref in list(input_codes.seen):
        code = ref()
        for entry in _debug_get_cache_entry_list(code) if code is not None else ():
            parts.append(f"{code.co_name}:{code.co_firstlineno}")
            parts.extend(part for part in getattr(entry.guard_manager, "code_parts", None) or ["<no guard code>"]
                         if BUILTINS_GUARD not in part)
    return _digest("\n".join(parts))


@dataclass
class Compiled:
    """One compile and its first call: the counts, the error or the output, and the compiled object the later calls
    call again (under the same settings: `again`)."""

    counts: dict[str, Any]
    error: Exception | None
    output: Any
    compiled: Callable | None
    stats: CompileStats
    settings: dict[str, Any]
    codes: list[str]                 # the first call's graphs, each by the digest of its code
    guards: str | None               # the first call's guards (guards_digest)
    mode: Mode = DEFAULT
    grads: dict[str, Any] | None = None   # in train: each parameter's gradient after the first call's backward

    @contextlib.contextmanager
    def again(self) -> Iterator[None]:
        """The block calls the compiled object again as the first call did: the same settings, the mode's context
        (no grad in eval)."""
        with patched(self.settings), in_mode.context(self.mode):
            yield


def compile_and_run(module: torch.nn.Module, inputs: dict[str, Any], *, settings: dict[str, Any],
                    backend: str = "count", mode: Mode = DEFAULT, device: str = "cpu") -> Compiled:
    """Compile `module` under `settings` and run it once on `inputs` in `mode` (in train: its loss's backward too;
    the counts are kept for a crash too: how far it got before failing)."""
    reset_dynamo()
    stats = CompileStats()
    error, output, compiled, grads = None, None, None, None
    start = time.perf_counter()
    try:
        with patched(settings):
            compiled = torch.compile(module, backend=counting_backend(stats, backend, mode.train),
                                     **in_mode.compile_kwargs(mode))
            in_mode.mark(inputs, mode)
            stepped = in_mode.step(module, compiled, inputs, mode, device)
            output, grads = stepped.output, stepped.grads
    except Exception as exc:  # the item's result, not the worker's failure
        error = exc
    elapsed = time.perf_counter() - start
    reasons = break_reasons()[:20]
    counts = {
        "graphs": stats.graphs,
        "ops_per_graph": list(stats.ops_per_graph),   # a copy: the later calls' graphs are theirs
        "ops": sum(stats.ops_per_graph),
        "graph_breaks": graph_break_count(),
        "break_reasons": reasons,
        "break_ids": [reason_id(r) for r in reasons],
        "recompiles": stats.recompiles,
        "compile_s": round(elapsed, 4),
        # only a train item has a backward (an eval item's stored fields are those it had before modes)
        **({"backward_graphs": stats.backward_graphs} if mode.train else {}),
    }
    return Compiled(counts, error, output, compiled, stats, settings, list(stats.codes), guards_digest(), mode,
                    grads)


def eager_run(module: torch.nn.Module, inputs: dict[str, Any], mode: Mode = DEFAULT, device: str = "cpu") -> float:
    """One uncompiled call in `mode` (eval: a forward, no grad); returns its seconds (a failure here is
    eager_error, or in another mode that mode's create_error)."""
    start = time.perf_counter()
    in_mode.step(module, module, inputs, mode, device)
    return time.perf_counter() - start
