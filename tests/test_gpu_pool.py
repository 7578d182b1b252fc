"""The GPU runner's pool, on this CPU machine with real workers and real compiles (issue 32).

A pool on a CUDA device that this torch lacks is refused in one line; the parent never imports torch, before or
while its workers run; an out-of-memory item gets its own status and one re-run alone; Inductor's shared compile
cache is hit by the second config's unchanged graphs (that it changes no result, and that no root means no lookup:
tests/test_gpu_check.py, on the same model and pools).
"""
import subprocess
import sys
import textwrap

import pytest

from harness.core.effects import effects_for
from harness.engine.configs import BUILTIN
from harness.engine.engine import SweepOptions, run_items
from harness.engine.events import CacheCounts, Result
from harness.engine.pool import Group, Pool, PoolError

pytestmark = pytest.mark.compile

FAULTS = ["tests.fault_models"]


def test_a_pool_on_cuda_without_cuda_is_refused_in_one_line():
    import torch   # only to know what to expect: the workers are asked, never this process's torch

    assert not torch.cuda.is_available(), "this test is for a machine without CUDA"
    with pytest.raises(PoolError) as refused:
        with Pool(SweepOptions(device="cuda", workers=1, timeout=60)) as pool:
            pool.environment()
    why = str(refused.value)
    assert "\n" not in why and why.startswith("--device cuda: no CUDA device in this torch"), why


def test_the_parent_holds_no_torch_while_its_workers_run():
    # A sweep's parent in a fresh interpreter: its workers are started as new interpreters (never forked), and
    # neither before they start nor after they ran a compile has the parent imported torch (so never CUDA).
    code = textwrap.dedent("""
        import sys
        from harness.engine.engine import SweepOptions, run_items
        from harness.engine.pool import Pool
        assert "torch" not in sys.modules
        seen = []
        start = Pool.start
        def watched(self, n=None):
            seen.append("torch" in sys.modules)
            return start(self, n)
        Pool.start = watched
        out, = run_items([("TinyItemModel", "baseline")], configs={}, base_settings={},
                         options=SweepOptions(workers=1, timeout=120, extra_modules=["tests.fault_models"]))
        print(out.status, seen, "torch" in sys.modules)
    """)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split("\n")[0] == "ok [False] False", ran.stdout


def test_out_of_memory_is_its_own_status_rerun_once_alone():
    items = [("Fault_oom_shared", "baseline"), ("Fault_oom_shared", "capture_scalar_outputs"),
             ("Fault_cuda_oom", "baseline"), ("Fault_cuda_oom", "capture_scalar_outputs")]
    outs = run_items(items, configs=dict(BUILTIN), base_settings={},
                     options=SweepOptions(workers=2, timeout=60, extra_modules=FAULTS))
    by = {(o.model, o.config): o for o in outs}
    # Beside other workers it ran out of memory; alone (the whole device) it compiled: the re-run's result stands.
    shared = by["Fault_oom_shared", "capture_scalar_outputs"]
    assert (shared.status, shared.attempts) == ("ok", 2), shared
    # Out of memory even alone: stored as such after its one re-run, no signature, untestable, never a crash.
    oom = by["Fault_cuda_oom", "capture_scalar_outputs"]
    assert (oom.status, oom.attempts, oom.signature) == ("out_of_memory", 2, None), oom
    assert oom.error_type.endswith("OutOfMemoryError") and "CUDA out of memory" in oom.error_message
    assert not oom.crashed and oom.crash_signature == "out_of_memory"
    assert by["Fault_cuda_oom", "baseline"].status == "ok" and by["Fault_cuda_oom", "baseline"].attempts == 1
    effects = {(e.model, e.config): e.effect for e in effects_for(outs)}
    assert effects["Fault_cuda_oom", "capture_scalar_outputs"] == "create_error"
    assert effects["Fault_oom_shared", "capture_scalar_outputs"] == "no_effect"


def _inductor(cache: str | None, configs: tuple[str, ...] = ("baseline", "capture_dynamic_output_shape_ops")
              ) -> tuple[dict[str, dict], list[CacheCounts]]:
    """TinyItemModel under baseline then capture_dynamic_output_shape_ops (the same graphs), inductor on CPU."""
    options = SweepOptions(workers=1, timeout=600, backend="inductor", extra_modules=FAULTS, compile_cache=cache)
    group = Group("TinyItemModel", [(i, name, BUILTIN[name]) for i, name in enumerate(configs)])
    results, counts = {}, []
    with Pool(options) as pool:
        for event in pool.run([group]):
            if isinstance(event, Result):
                results[event.outcome.config] = event.outcome
            elif isinstance(event, CacheCounts):
                counts.append(event)
    return results, counts


def test_inductor_shared_cache_hits_the_second_configs_graphs_and_the_next_nights(tmp_path):
    root = str(tmp_path / "cache")
    cached, counts = _inductor(root)
    assert [c.index for c in counts] == [0, 1]
    first, second = counts
    assert first.fxgraph_miss >= 1 and first.fxgraph_hit == 0, first
    assert first.autograd_miss == first.fxgraph_miss and first.autograd_hit == 0, first
    # The flag changes nothing in this model: each of its graphs is the baseline's, served from the cache, AOTAutograd's
    # entry included (so neither AOTAutograd nor Inductor ran for it: only Dynamo's trace).
    assert second.fxgraph_hit == first.fxgraph_miss and second.fxgraph_miss == 0, second
    assert second.autograd_hit == first.autograd_miss and second.autograd_miss == 0, second
    # One folder per torch build under the root.
    builds = [p.name for p in (tmp_path / "cache").iterdir()]
    import torch

    assert len(builds) == 1 and builds[0].startswith(torch.__version__)
    # The next night of the same build (new workers, the same root): the baseline's graphs hit as well.
    _, (again,) = _inductor(root, ("baseline",))
    assert (again.fxgraph_hit, again.fxgraph_miss, again.autograd_hit) == (first.fxgraph_miss, 0, first.autograd_miss)
    for config in ("baseline", "capture_dynamic_output_shape_ops"):
        assert cached[config].status == "ok", cached[config]
    # Without a root (no lookup at all) and the same results with and without: tests/test_gpu_check.py, whose device
    # check runs this model on these pools both ways (a third cold Inductor compile here proved it again).


def test_a_workers_threads_are_its_share_of_the_asked_pool_whatever_starts(monkeypatch):
    # Inductor keys a CPU kernel by the thread count: a sweep of one model, or a re-run alone, must compile with the
    # threads a full pool's worker has, or it misses the nightly's entries in the shared cache.
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    options = SweepOptions(workers=4, timeout=60)
    pools = [Pool(options, items=8), Pool(options, items=1), Pool(options, alone=True)]
    try:
        assert [(p.size, p.threads) for p in pools] == [(4, 4), (1, 4), (1, 4)]
    finally:
        for p in pools:
            p.close()
