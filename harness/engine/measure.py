"""What an item measured beside its compile, in the worker: its peak memory, and how it ended (ok, out of memory,
or an error with its signature)."""
from __future__ import annotations

import traceback
from typing import Any

from harness.core.outcome import OUT_OF_MEMORY
from harness.engine import events

TRACEBACK_CHARS = 16_000  # Dynamo's verbose tracebacks run long; the head and tail say the most


def clip(text: str, limit: int = TRACEBACK_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + "\n[... clipped ...]\n" + text[-(limit - head):]


def reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) so the next reading is this item's peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_mb(device: str) -> float | None:
    import torch

    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return status_mb("VmHWM:")


def rss_mb() -> float | None:
    return status_mb("VmRSS:")


def status_mb(field: str) -> float | None:
    """One memory line of /proc/self/status (VmRSS, VmHWM) in MiB; None where there is no /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def error_fields(exc: BaseException) -> dict[str, Any]:
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
        "error_message": clip(message, 8000),
        "torch_frame": innermost_torch_frame(tb),
        "signature": sig,
        "traceback": clip(tb),
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


def memory_fields(exc: BaseException, device: str) -> dict[str, Any]:
    """An out-of-memory item's error fields: what ran out, but no signature (it is not a crash of any flag); the
    allocator's cache emptied for the next item."""
    import torch

    fields = error_fields(exc)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"error_type": fields["error_type"], "error_message": fields["error_message"],
            "traceback": fields["traceback"]}


def ended(error: Exception | None, device: str) -> dict[str, Any]:
    """How a compile ended: ok, out of memory, or an error with its signature."""
    if error is None:
        return {"status": "ok"}
    if out_of_memory(error):
        return {"status": OUT_OF_MEMORY, **memory_fields(error, device)}
    return {"status": "error", **error_fields(error)}


def cache_counts(index: int) -> events.CacheCounts:
    """What the FX graph cache and the AOTAutograd cache did since the last reset (one compile)."""
    from torch._dynamo.utils import counters

    return events.CacheCounts(index, fxgraph_hit=counters["inductor"]["fxgraph_cache_hit"],
                              fxgraph_miss=counters["inductor"]["fxgraph_cache_miss"],
                              autograd_hit=counters["aot_autograd"]["autograd_cache_hit"],
                              autograd_miss=counters["aot_autograd"]["autograd_cache_miss"])
