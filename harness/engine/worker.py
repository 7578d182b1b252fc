"""The worker process: import torch once, then build models and compile them on request (transformers is imported
before the first model that needs it, never for test-only registered models: 3-4 s of a worker's start).

Started by harness/engine/pool.py as `[python, "-m", "harness.engine.worker", JSON]` under any
interpreter (--python), with the project root on PYTHONPATH. It imports only the
stdlib, torch, transformers and harness. Requests arrive as JSON lines on stdin;
events go back as JSON lines on a dedicated pipe (fd in the JSON argument), so
whatever a model prints to stdout cannot corrupt the protocol.

Requests and events are the types of harness.engine.events (EnvRequest, RunRequest, ExitRequest or EOF; Ready,
Env, Built, Start, Result, Done), written and read there. A compile request is one model's group
(harness.engine.group: prune, pool, answer, trace); its baseline's result, when it is the request's first item,
carries the config keys read per call window (harness.engine.flags.reads). A pooled compile says "start" with
index -1, so a worker that dies in one fails no item: the parent retries them, alone.

Modes of "run": compile (each item under its config), eager (build + one eager forward), job (call
the caller's "module:function" with (model, device); its JSON answer is the result's "data").
"""
from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
import time
from typing import Any

from harness.core.model_build import ModelBuild
from harness.core.modes import Mode
from harness.core.outcome import OUT_OF_MEMORY, SKIPPED, Outcome
from harness.core.run_environment import RunEnvironment
from harness.engine import events, measure
from harness.engine.events import RunRequest
from harness.zoo import BuildError, Built


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


def _skip_reason(model: str, mode: Mode) -> str | None:
    """Why the model's lock entry records that it cannot run in `mode` (harness.zoo.mode_record), or None: it can,
    or the record does not say (a malformed record included: it costs only itself, the mode runs as before)."""
    from harness import zoo

    try:
        return zoo.cannot_run(model, mode)
    except zoo.CorruptEntry as exc:
        print(f"flagsweep worker: {exc}: the mode is run as before", file=sys.stderr)
        return None


def _prepare(model: str) -> None:
    """The zoo's imports for building `model` (transformers, unless it is a test-only model), before any timing."""
    from harness import zoo

    zoo.prepare(model)


def _repro_data(model: str, built: Any, second: dict | None) -> ModelBuild | None:
    """What a reproducer needs to rebuild this model without the zoo (None: not rebuildable), with the second input
    spec the references chose (None: no second_size call was made)."""
    import transformers

    from harness.zoo.build import SEED

    if not built.config:   # a test-only registered model: no transformers config to embed
        return None
    return ModelBuild(model=model, config_class=type(built.module.config).__name__, config=built.config,
                      spec=built.spec, seed=SEED, fingerprint=built.fingerprint,
                      transformers_version=transformers.__version__, second_spec=second)


def run_job(chan: Channel, req: RunRequest) -> None:
    """Call the requested job ("module:function") on the model; its answer, or its error, is the one result. The
    answer travels as JSON text (engine.run_job reads it back): a record's numbers must be finite, an answer's need
    not be (a config's infinity, an output metric's NaN)."""
    (index, label, _), = req.items
    module, _, name = (req.job or "").partition(":")
    try:
        _prepare(req.model)
        data = json.dumps(getattr(importlib.import_module(module), name)(req.model, req.device), default=str)
    except Exception as exc:
        chan.send(events.Result(index, Outcome(req.model, label, "error", **measure.error_fields(exc))))
        return
    chan.send(events.Result(index, Outcome(req.model, label, "ok"), data=data))


def run_group(chan: Channel, req: RunRequest) -> None:
    """Build one model once, then run each requested item (harness.engine.group.Group for compiles)."""
    from harness.engine.backend import reset_dynamo
    from harness.engine.group import Group

    built, common, failed = _build_and_check(req)
    if failed is not None:
        chan.send(events.Built(ok=False))
        for index, config, _ in req.items:
            chan.send(events.Result(index, Outcome(model=req.model, config=config, status=failed, **common)))
        return
    from harness.engine.scenarios import References

    refs = _references(req, built) if req.mode == "compile" and req.accuracy.enabled else None
    second = refs.second_spec if isinstance(refs, References) else None
    chan.send(events.Built(ok=True, build=_repro_data(req.model, built, second)))
    eager_s = common.pop("eager_s")
    if req.mode == "eager":
        for index, config, _ in req.items:
            chan.send(events.Result(index, Outcome(model=req.model, config=config, status="ok",
                                                   compile_s=round(eager_s, 4), **common)))
        return
    Group(req, built, common, chan.send, refs).run()
    reset_dynamo()


def _build_and_check(req: RunRequest) -> tuple[Built | None, dict[str, Any], str | None]:
    """The model built and run once in eager: (built, the fields every item shares, None) or the status of the
    failure instead (its fields in the second)."""
    from harness.engine import in_mode
    from harness.engine.backend import eager_run, reset_dynamo

    why = _skip_reason(req.model, req.sweep_mode)
    if why is not None:   # the lock records the model cannot run in this mode: skipped before its build
        return None, {"build_s": 0.0, "error_message": why}, SKIPPED
    start = time.perf_counter()
    built, status, cause, common = None, None, None, {}
    try:
        _prepare(req.model)          # transformers failing to import is this model's create_error, not the worker's
        start = time.perf_counter()  # the imports are not the build's time
        built = _build(req.model, req.device)
    except Exception as exc:  # a BuildError carries its status; anything else is a failed create
        status, cause = (exc.status, exc.cause) if isinstance(exc, BuildError) else \
            ("create_error", f"{type(exc).__name__}: {exc}")
        if measure.out_of_memory(exc):
            status, cause = OUT_OF_MEMORY, None
            common.update(measure.memory_fields(exc, req.device))
    common["build_s"] = round(time.perf_counter() - start, 4)
    if built is not None:
        common.update(stratum=built.stratum or None, fingerprint=built.fingerprint or None,
                      text_only=bool(built.text_only))
        try:
            reset_dynamo()
            in_mode.prepare(built.module, req.sweep_mode)
            common["eager_s"] = eager_run(built.module, built.inputs, req.sweep_mode, req.device)
        except Exception as exc:
            oom = measure.out_of_memory(exc)
            status, cause = (OUT_OF_MEMORY, None) if oom else ("eager_error", None)
            if not oom and not req.sweep_mode.is_default:   # the model cannot run in this mode: skipped, not a crash
                status, cause = "create_error", _cannot_run(req.sweep_mode, exc)
            else:
                common.update(measure.memory_fields(exc, req.device) if oom else measure.error_fields(exc))
    if status is None:
        return built, common, None
    if cause:
        from harness.core.signature import signature

        common.update(error_type=status, error_message=cause, signature=signature(status, cause))
    return None, common, status


def _cannot_run(mode: Mode, exc: Exception) -> str:
    """Why a model cannot run in a mode (its items' create_error)."""
    return f"cannot run in mode {mode.name} in eager: {type(exc).__name__}: {str(exc)[:200]}"


def _references(req: RunRequest, built: Built) -> Any:
    """Eager's answers for the group (harness.engine.scenarios.References), or why there are none."""
    from harness.engine.scenarios import References

    if req.sweep_mode.train or req.sweep_mode.half:   # eager's answer is not eval's: the mode's own oracle
        from harness.engine.step_oracle import ModeReference

        try:
            return ModeReference(built, req.sweep_mode, req.device, req.accuracy)
        except Exception as exc:
            return f"no eager reference in mode {req.sweep_mode.name}: {type(exc).__name__}: {str(exc)[:200]}"
    try:
        return References(req.model, built, req.device, req.accuracy)
    except Exception as exc:   # a model that cannot be deep-copied or run again: its calls are not judged
        return f"no eager reference: {type(exc).__name__}: {str(exc)[:200]}"


def main(argv: list[str]) -> int:
    """Serve requests until told to exit or stdin closes."""
    opts = events.Startup.from_json(argv[1]) if len(argv) > 1 else events.Startup()
    chan = Channel(opts.fd)
    _die_with_parent()
    # A segfault or abort prints the Python stack to stderr (the parent keeps its tail).
    faulthandler.enable(file=sys.stderr, all_threads=False)
    import torch

    torch.set_num_threads(opts.threads or torch.get_num_threads())
    setup_device(opts.device, opts.memory_fraction)
    setup_compile_cache(opts.compile_cache, opts.scratch)
    # Keep Dynamo's internal frames in tracebacks: the innermost torch frame is the point.
    torch._dynamo.config.verbose = True
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
            chan.send(events.Done(rss_mb=measure.rss_mb()))
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
