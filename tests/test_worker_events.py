"""The worker's answer is a type: each event line is read strictly, and a worker of another protocol is refused.

The pool's reader and the worker's writer are harness.engine.events; these tests speak the wire form (JSON lines),
and the last one starts a real worker process that answers `ready` in another protocol version.
"""
import json
import stat
import sys

import pytest

from harness.core.calls import Call
from harness.core.model_build import ModelBuild
from harness.core.outcome import Outcome
from harness.core.record import RecordError
from harness.core.run_environment import RunEnvironment
from harness.engine import events
from harness.core.options import Accuracy
from harness.core.options import SweepOptions
from harness.engine.pool import Pool, PoolError


def wire(event) -> dict:
    """What the pool reads off the pipe for `event`, as the worker writes it."""
    return json.loads(events.encode(event))


BUILD = ModelBuild(model="BertModel", config_class="BertConfig", config={"hidden_size": 32}, spec={}, seed=0)
EVERY_EVENT = [
    events.Ready(pid=42),
    events.Env(RunEnvironment(torch_version="2.13.0", device="cpu"),
               events.ConfigSpace(modules=["torch._dynamo.config"], entries={"k": {"type": "bool", "default": False}})),
    events.Built(ok=True, build=BUILD),
    events.Built(ok=False),
    events.Start(index=-1),
    events.Result(3, Outcome("BertModel", "baseline", "ok", graphs=2), config_reads={"torch._dynamo.config.k": 1}),
    events.Result(0, Outcome("BertModel", "job", "ok"), data={"stratum": "decoder_llm"}),
    events.Result(1, Outcome("BertModel", "baseline", "ok", calls=[
        Call("first", 1, accuracy="exact"), Call("second_size", 1, 1, ["size mismatch at index 0"], "close", "max abs"),
        Call("hook_added", accuracy="wrong", output="logits", metadata=["logits: strides (1,) in eager, (2,) compiled"])])),
    events.Done(rss_mb=512.5),
]


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_every_event_reads_back_as_written(event):
    assert events.read_event(wire(event)) == event


@pytest.mark.parametrize("request_", [events.EnvRequest(device="cpu", backend="count"), events.ExitRequest(),
                                      events.RunRequest(model="M", items=[[0, "baseline", {}]], mode="compile", job=None,
                                                        prune=["a"], pool=True, base_settings={}, backend="count",
                                                        device="cpu", accuracy=Accuracy(rtol=1e-2))])
def test_every_request_reads_back_as_written(request_):
    assert events.read_request(json.loads(events.encode(request_))) == request_


@pytest.mark.parametrize("line, field", [
    ({"event": "start"}, "missing field 'index'"),
    ({"event": "start", "index": 0, "model": "M"}, "unknown field 'model'"),
    ({"event": "done", "rss_mb": 1.0, "rss": 1.0}, "unknown field 'rss'"),
    ({"event": "result", "index": 0, "outcome": {"model": "M", "config": "c", "status": "ok", "graps": 1}},
     "outcome: unknown field 'graps'"),
    ({"event": "result", "index": 0, "outcome": {"model": "M", "status": "ok"}}, "outcome: missing field 'config'"),
    ({"event": "built", "ok": True, "build": {"model": "M", "config_class": "C", "config": {}, "spec": {}}},
     "stored build: missing field 'seed'"),
    ({"event": "env", "env": {"torch_version": "2", "torch_vers": "2"}, "config_space": {"modules": [], "entries": {}}},
     "run environment: unknown field 'torch_vers'"),
    ({"event": "finished", "index": 0}, "unknown event 'finished'"),
    ({"index": 0}, "missing field 'event'"),
])
def test_an_event_with_an_unknown_or_missing_field_is_an_error_naming_it(line, field):
    with pytest.raises(RecordError, match=field):
        events.read_event(line)


def test_a_stored_outcome_is_read_strictly_too():
    assert Outcome.from_dict(Outcome("M", "c", "ok", graphs=1).to_dict()) == Outcome("M", "c", "ok", graphs=1)
    with pytest.raises(RecordError, match="outcome: unknown field 'config_reads'"):
        Outcome.from_dict({"model": "M", "config": "c", "status": "ok", "config_reads": {}})
    with pytest.raises(RecordError, match="outcome: missing field 'status'"):
        Outcome.from_dict({"model": "M", "config": "c"})


def test_ready_in_another_protocol_version_is_named_before_its_fields():
    with pytest.raises(RecordError, match=f"version 0, this flagsweep reads version {events.PROTOCOL}"):
        events.read_event({"event": "ready", "v": 0, "pid": 1, "hello": "from the future"})


def test_a_worker_of_another_protocol_is_a_pool_error_at_ready(tmp_path):
    """A real worker process (any interpreter the pool is given) that says `ready` in protocol 0."""
    # Started as `python -m harness.engine.worker STARTUP`: the script sees those as its arguments.
    stand_in = tmp_path / "python"
    stand_in.write_text(f"#!{sys.executable}\nimport json, os, sys\nfd = json.loads(sys.argv[-1])['fd']\n"
                        "os.write(fd, json.dumps({'event': 'ready', 'v': 0, 'pid': os.getpid()}).encode() + b'\\n')\n"
                        "sys.stdin.read()\n")
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    pool = Pool(SweepOptions(workers=1, timeout=30, python=str(stand_in)))
    with pytest.raises(PoolError) as refused:
        pool.environment()
    assert str(refused.value).startswith(f"{stand_in}: a worker's answer does not read")
    assert f"version 0, this flagsweep reads version {events.PROTOCOL}" in str(refused.value)
    assert pool.workers == []      # killed, not left behind


def test_a_build_whose_config_holds_an_infinity_travels_and_is_stored_and_read_back(tmp_path) -> None:
    """Mamba 2's `time_step_limit` is [0.0, inf] (12 lock entries hold a non-finite config value): its `built` event
    once failed the record check ("inf is not a finite number") and aborted the sweep. The build's stored form writes
    such a float as a one-key object; the event, a run's stored build and its reading give the float back."""
    import math

    from state import db, runs

    build = ModelBuild(model="Mamba2Model", config_class="Mamba2Config", spec={}, seed=0,
                       config={"time_step_limit": [0.0, float("inf")], "floor": float("-inf"),
                               "sub": {"eps": float("nan"), "width": 8}})
    read = events.read_event(wire(events.Built(ok=True, build=build)))
    limit, sub = read.build.config["time_step_limit"], read.build.config["sub"]
    assert limit[0] == 0.0 and limit[1] == math.inf and read.build.config["floor"] == -math.inf
    assert math.isnan(sub["eps"]) and sub["width"] == 8
    assert json.dumps(build.to_dict(), allow_nan=False)      # the stored form is JSON without NaN or Infinity
    conn = db.connect(tmp_path / "state.sqlite")
    run_id = runs.create_run(conn, environment=RunEnvironment(torch_version="2.13.0", device="cpu"),
                             models=["Mamba2Model"], configs={"baseline": {}})
    runs.record_model(conn, run_id, build)
    stored = runs.model_data(conn, run_id)["Mamba2Model"].config
    assert stored["time_step_limit"][1] == math.inf and math.isnan(stored["sub"]["eps"])
    # the row is JSON SQLite reads (json_valid): a NaN or Infinity in it would make it malformed
    assert conn.execute("SELECT json_valid(data) FROM run_models WHERE run_id = ?", (run_id,)).fetchone()[0] == 1
