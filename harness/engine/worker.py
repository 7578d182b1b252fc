"""The worker process: import torch once, then build models and compile them on request.

Started by harness/engine/pool.py as `[python, "-m", "harness.engine.worker", JSON]` under any
interpreter (--python), with the project root on PYTHONPATH. It imports only the
stdlib, torch, transformers and harness. Requests arrive as JSON lines on stdin;
events go back as JSON lines on a dedicated pipe (fd in the JSON argument), so
whatever a model prints to stdout cannot corrupt the protocol.

Requests and events are the types of harness.engine.events (EnvRequest, RunRequest, ExitRequest or EOF; Ready,
Env, Built, Start, Result, Done), written and read there. The baseline's result (when it is the request's first item)
carries `config_reads`, the config keys its compile read (harness.engine.flags.reads); an item named in "prune"
whose keys the baseline never read is reported as the baseline's result with reason "not_read", uncompiled.
With "pool", the other "prune" items are pooled: compiled together, all their settings at once; a pool whose compile matches
the baseline's (same graphs, ops, breaks and recompiles) reports each of its items as the baseline's result with
reason "pooled", one that differs is split in halves, and a pool of one is that item's own trace. A pooled
compile says "start" with index -1, so a worker that dies in one fails no item: the parent retries them, alone.

Modes of "run": compile (each item under its config), eager (build + one eager forward), job (call
the caller's "module:function" with (model, device); its JSON answer is the result's "data").
"""
from __future__ import annotations

import contextlib
import faulthandler
import importlib
import json
import os
import sys
import time
import traceback
from typing import Any, Callable

from harness.core.calls import FIRST, Call
from harness.core.effects import BASELINE
from harness.core.model_build import ModelBuild
from harness.core.outcome import NOT_READ, OUT_OF_MEMORY, POOLED, Outcome
from harness.core.run_environment import RunEnvironment
from harness.engine import events
from harness.engine.events import RunRequest
from harness.zoo import BuildError, Built
from harness.zoo.build import SEED

TRACEBACK_CHARS = 16_000  # Dynamo's verbose tracebacks run long; the head and tail say the most


class Channel:
    """JSON lines to the parent over the result pipe."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, event: events.Event) -> None:
        """Write one event line (a retry loop: a pipe may take a long line in parts)."""
        view = memoryview(events.encode(event))
        while view:
            view = view[os.write(self.fd, view):]


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so a killed sweep leaves no orphans compiling."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)
    except Exception:  # not Linux: stdin EOF still ends the worker between items
        pass


def _clip(text: str, limit: int = TRACEBACK_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + "\n[... clipped ...]\n" + text[-(limit - head):]


def _reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) so the next reading is this item's peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_mb(device: str) -> float | None:
    import torch

    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return _status_mb("VmHWM:")


def _rss_mb() -> float | None:
    return _status_mb("VmRSS:")


def _status_mb(field: str) -> float | None:
    """One memory line of /proc/self/status (VmRSS, VmHWM) in MiB; None where there is no /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _error_fields(exc: BaseException) -> dict[str, Any]:
    from harness.engine.gbregistry import error_id
    from harness.core.signature import error_kind, innermost_torch_frame, signature

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = str(exc)
    error_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
    gb_id = error_id(exc)
    sig = signature(error_type, message, tb, gb_id=gb_id)
    gb_id = gb_id if gb_id and sig.startswith(f"{gb_id}: ") else None  # only an Unsupported is named by its id
    return {
        # The type the signature names: Dynamo's wrappers (InternalTorchDynamoError,
        # BackendCompilerFailed) peeled off, so titles say what actually failed.
        "error_type": error_kind(error_type, message),
        "gb_id": gb_id,
        "error_message": _clip(message, 8000),
        "torch_frame": innermost_torch_frame(tb),
        "signature": sig,
        "traceback": _clip(tb),
    }


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether the device ran out of memory: a CUDA (or CPU) out-of-memory error, or one that Dynamo or Inductor
    wrapped (it rides on __cause__ / __context__)."""
    import torch

    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _memory_fields(exc: BaseException, device: str) -> dict[str, Any]:
    """An out-of-memory item's error fields: what ran out, but no signature (it is not a crash of any flag); the
    allocator's cache emptied for the next item."""
    import torch

    fields = _error_fields(exc)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"error_type": fields["error_type"], "error_message": fields["error_message"],
            "traceback": fields["traceback"]}


def _ended(error: Exception | None, device: str) -> dict[str, Any]:
    """How a compile ended: ok, out of memory, or an error with its signature."""
    if error is None:
        return {"status": "ok"}
    if out_of_memory(error):
        return {"status": OUT_OF_MEMORY, **_memory_fields(error, device)}
    return {"status": "error", **_error_fields(error)}


def cache_counts(index: int) -> events.CacheCounts:
    """What the FX graph cache and the AOTAutograd cache did since the last reset (one compile)."""
    from torch._dynamo.utils import counters

    return events.CacheCounts(index, fxgraph_hit=counters["inductor"]["fxgraph_cache_hit"],
                              fxgraph_miss=counters["inductor"]["fxgraph_cache_miss"],
                              autograd_hit=counters["aot_autograd"]["autograd_cache_hit"],
                              autograd_miss=counters["aot_autograd"]["autograd_cache_miss"])


def setup_device(device: str, memory_fraction: float) -> None:
    """A CUDA worker's start: its share of the GPU's memory, and TF32 off (outputs are compared; TF32 matmuls and
    convolutions differ from fp32 by more than the tolerance). A device this torch lacks: one line, exit."""
    import torch

    from harness.engine.devices import why_not

    if device == "cpu":
        return
    why = why_not(device)
    if why is not None:
        sys.stderr.write(f"--device {device}: {why}\n")
        sys.stderr.flush()
        os._exit(events.NO_DEVICE_EXIT)
    if device.startswith("cuda"):
        torch.cuda.set_per_process_memory_fraction(memory_fraction, torch.device(device))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def build_key() -> str:
    """The torch build this worker runs, as a folder name: a cache must not outlive a torch change."""
    import re

    import torch

    git = (getattr(torch.version, "git_version", None) or "unknown")[:12]
    return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{torch.__version__}-{git}")


def setup_compile_cache(root: str, scratch: str) -> None:
    """Inductor's and AOTAutograd's caches in the shared folder of this build under `root`, so a graph the baseline
    and a flag both produce is compiled once, by whichever worker gets there first; without a root, the caches off
    and the worker's own folder in `scratch` (removed with the pool), never a cache left by another run (its C++
    kernels, found again by their source, still serve this worker's later items)."""
    import tempfile

    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    if root:
        folder = os.path.join(root, build_key())
        os.makedirs(folder, exist_ok=True)
    else:
        folder = tempfile.mkdtemp(prefix="inductor-", dir=scratch or None)
    # Inductor reads its cache folder from the environment, at compile time (TRITON_CACHE_DIR follows it).
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    inductor_config.fx_graph_cache = bool(root)
    functorch_config.enable_autograd_cache = bool(root)


def _build(model: str, device: str) -> Built:
    """The zoo's build (the one place here that knows the zoo's API)."""
    from harness import zoo

    return zoo.build(model, device)


def _repro_data(model: str, built: Any) -> ModelBuild | None:
    """What a reproducer needs to rebuild this model without the zoo (None: not rebuildable)."""
    import transformers

    from harness.zoo.build import SEED

    if not built.config:   # a test-only registered model: no transformers config to embed
        return None
    return ModelBuild(model=model, config_class=type(built.module.config).__name__, config=built.config,
                      spec=built.spec, seed=SEED, fingerprint=built.fingerprint,
                      transformers_version=transformers.__version__)


def run_job(chan: Channel, req: RunRequest) -> None:
    """Call the requested job ("module:function") on the model; its answer, or its error, is the one result."""
    (index, label, _), = req.items
    module, _, name = (req.job or "").partition(":")
    try:
        data = getattr(importlib.import_module(module), name)(req.model, req.device)
    except Exception as exc:
        chan.send(events.Result(index, Outcome(req.model, label, "error", **_error_fields(exc))))
        return
    chan.send(events.Result(index, Outcome(req.model, label, "ok"), data=data))


def run_group(chan: Channel, req: RunRequest) -> None:
    """Build one model once, then compile it under each requested config, reporting each item."""
    import torch

    from harness.engine.flags import reads as readset
    from harness.engine.backend import compile_and_run, eager_run, reset_dynamo
    from harness.engine import scenarios

    model, device, items, mode, backend, base = req.model, req.device, req.items, req.mode, req.backend, req.base_settings

    def report(index: int, config: str, config_reads: dict[str, Any] | None = None, **fields: Any) -> None:
        chan.send(events.Result(index, Outcome(model=model, config=config, **fields), config_reads=config_reads))

    start = time.perf_counter()
    built, status, cause = None, None, None
    common: dict[str, Any] = {}
    try:
        built = _build(model, device)
    except Exception as exc:  # a BuildError carries its status; anything else is a failed create
        status, cause = (exc.status, exc.cause) if isinstance(exc, BuildError) else \
            ("create_error", f"{type(exc).__name__}: {exc}")
        if out_of_memory(exc):
            status, cause = OUT_OF_MEMORY, None
            common.update(_memory_fields(exc, device))
    common["build_s"] = build_s = round(time.perf_counter() - start, 4)
    if built is not None:
        common.update(stratum=built.stratum or None, fingerprint=built.fingerprint or None,
                      text_only=bool(built.text_only))
        try:
            reset_dynamo()
            eager_s = eager_run(built.module, built.inputs)
        except Exception as exc:
            status, cause = (OUT_OF_MEMORY, None) if out_of_memory(exc) else ("eager_error", None)
            common.update(_memory_fields(exc, device) if out_of_memory(exc) else _error_fields(exc))
    if status is not None:
        chan.send(events.Built(ok=False))
        if cause:
            from harness.core.signature import signature

            common.update(error_type=status, error_message=cause, signature=signature(status, cause))
        for index, config, _ in items:
            report(index, config, status=status, **common)
        return
    chan.send(events.Built(ok=True, build=_repro_data(model, built)))
    if mode == "eager":
        for index, config, _ in items:
            report(index, config, status="ok", compile_s=round(eager_s, 4), **common)
        return
    prunable, reads, baseline = set(req.prune), None, None
    pooled: list[tuple[int, str, dict]] = []
    refs: list[scenarios.References | str] = []   # eager's answers, made at the first compile, shared by the group

    def trace(index: int, settings: dict, *, first: bool = False) -> tuple[dict[str, Any], dict]:
        """Compile under `settings` (index -1: a pool); the first item counts the build and records the reads."""
        chan.send(events.Start(index))
        if req.accuracy.enabled and not refs:
            refs.append(_references(model, built, device, req.accuracy))
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        _reset_peak()
        made: list = []
        then = _later_calls(built.module, refs[0], made) if refs else None
        with readset.recording() if first else contextlib.nullcontext({}) as seen:
            torch.manual_seed(SEED)   # as every eager reference run: a model that draws numbers draws the same
            counts, error = compile_and_run(built.module, scenarios.clone(built.inputs),
                                            settings={**base, **settings}, backend=backend, then=then)
        if backend == "inductor":
            chan.send(cache_counts(index))
        fields = {**common, **counts, "peak_mem_mb": _peak_mb(device), "build_s": build_s if first else 0.0}
        fields.update(_ended(error, device))
        fields["calls"] = made[0] if made else _first_only(counts, error, refs)
        return fields, seen

    for n, (index, config, settings) in enumerate(items):
        if reads is not None and config in prunable:
            if not any(key in reads for key in settings):
                report(index, config, **{**baseline, "build_s": 0.0, "compile_s": 0.0, "reason": NOT_READ})
            else:
                pooled.append((index, config, settings))
            continue
        first = config == BASELINE and n == 0
        fields, seen = trace(index, settings, first=first)
        if first:   # what a flag the baseline never read would give, and the read set
            reads, baseline = seen, fields
            report(index, config, **fields, config_reads=seen)
        else:
            report(index, config, **fields)
    for some in [pooled] if req.pool else [[item] for item in pooled]:
        trace_pooled(some, baseline, lambda index, settings: trace(index, settings)[0], report)
    reset_dynamo()


def _references(model: str, built: Built, device: str, accuracy: Any) -> Any:
    """Eager's answers for the group (harness.engine.scenarios.References), or why there are none."""
    from harness.engine.scenarios import References

    try:
        return References(model, built, device, accuracy)
    except Exception as exc:   # a model that cannot be deep-copied or run again: its calls are not judged
        return f"no eager reference: {type(exc).__name__}: {str(exc)[:200]}"


def _later_calls(module: Any, refs: Any, made: list) -> Callable | None:
    """The `then` of compile_and_run: every call after the first, appended to `made` (None: no references)."""
    from harness.engine import scenarios

    if isinstance(refs, str):
        return None
    recorder = scenarios.Recorder()

    def then(compiled: Callable, output: Any, stats: Any) -> None:
        try:
            made.append(scenarios.calls(compiled, output, lambda: stats.graphs, module, refs, recorder, _error_fields))
        except Exception as exc:   # the oracle's own failure costs the calls' verdicts, never the item
            made.append([Call(FIRST, stats.graphs, detail=f"the oracle failed: {type(exc).__name__}: {str(exc)[:200]}")])
    return then


def _first_only(counts: dict[str, Any], error: BaseException | None, refs: list) -> list[Call]:
    """The calls of an item whose later calls were not made: none with the checks off; else its first call, not
    judged (it raised, or there is no eager reference)."""
    if not refs:
        return []
    found = _error_fields(error) if error is not None else {"error_type": None, "signature": None}
    why = "the first call raised" if error is not None else refs[0]
    return [Call(FIRST, counts["graphs"], 0, [], "not_judged", why, error_type=found["error_type"],
                 signature=found["signature"])]


# What a pooled compile must match in the baseline's result to stand for each of its configs: the graph effects'
# fields, and its calls (correctness and recompiles) as far as the effects read them.
SAME_AS_BASELINE = ("status", "signature", "graphs", "ops_per_graph", "graph_breaks", "break_reasons", "recompiles")
CALL_FIELDS = ("scenario", "graphs", "recompiles", "recompile_reasons", "accuracy", "output", "error_type", "signature")


def same_as_baseline(fields: dict[str, Any], baseline: dict[str, Any]) -> bool:
    """A pooled compile stands for its configs: the same graph fields and the same calls as the baseline's."""
    def calls(found: dict[str, Any]) -> list[tuple]:
        return [tuple(getattr(c, k) for k in CALL_FIELDS) for c in found.get("calls", [])]
    return all(fields.get(k) == baseline.get(k) for k in SAME_AS_BASELINE) and calls(fields) == calls(baseline)


def trace_pooled(pool: list[tuple[int, str, dict]], baseline: dict[str, Any],
                 trace: Callable[[int, dict], dict[str, Any]], report: Callable[..., None]) -> None:
    """Compile the pool's configs together; as the baseline: each is reported so (pooled); else halves, down
    to single configs, which are their own trace. Configs that set one key two ways are never pooled."""
    if len(pool) == 1:
        index, config, settings = pool[0]
        report(index, config, **trace(index, settings))
        return
    together: dict[str, Any] = {}
    clash = False
    for _, _, settings in pool:
        clash = clash or any(k in together and together[k] != v for k, v in settings.items())
        together.update(settings)
    fields = None if clash else trace(-1, together)
    if fields is not None and same_as_baseline(fields, baseline):
        for index, config, _ in pool:
            report(index, config, **{**baseline, "build_s": 0.0, "compile_s": 0.0, "reason": POOLED})
        return
    half = len(pool) // 2
    trace_pooled(pool[:half], baseline, trace, report)
    trace_pooled(pool[half:], baseline, trace, report)


def main(argv: list[str]) -> int:
    """Serve requests until told to exit or stdin closes."""
    opts = events.Startup.from_json(argv[1]) if len(argv) > 1 else events.Startup()
    chan = Channel(opts.fd)
    _die_with_parent()
    # A segfault or abort prints the Python stack to stderr (the parent keeps its tail).
    faulthandler.enable(file=sys.stderr, all_threads=False)
    import torch
    import transformers

    torch.set_num_threads(opts.threads or torch.get_num_threads())
    setup_device(opts.device, opts.memory_fraction)
    setup_compile_cache(opts.compile_cache, opts.scratch)
    # Keep Dynamo's internal frames in tracebacks: the innermost torch frame is the point.
    torch._dynamo.config.verbose = True
    transformers.logging.set_verbosity_error()
    import harness.zoo  # noqa: F401  (its registry must exist before extra modules register)

    for name in opts.extra_modules:
        __import__(name)
    chan.send(events.Ready(pid=os.getpid()))
    for line in sys.stdin:
        if not line.strip():
            continue
        req = events.read_request(json.loads(line))
        if isinstance(req, events.ExitRequest):
            break
        if isinstance(req, events.EnvRequest):
            chan.send(_environment(req))
        else:
            (run_job if req.mode == "job" else run_group)(chan, req)
            chan.send(events.Done(rss_mb=_rss_mb()))
    return 0


def _environment(req: events.EnvRequest) -> events.Env:
    """The environment here, and the config space of the request's backend."""
    from harness.engine.environment import gather
    from harness.engine.flags.space import list_here, modules_for

    modules = modules_for(req.backend)
    return events.Env(RunEnvironment.from_dict(gather(req.device)),
                      events.ConfigSpace(modules=modules, entries=list_here(modules)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
