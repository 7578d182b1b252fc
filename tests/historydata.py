"""Builders of realistic stored runs for the history, diff and report tests (real SQLite files)."""
from __future__ import annotations

import sqlite3
from typing import Iterable

from harness.core.options import RunOptions
from harness.core.outcome import Outcome
from state import history, runs
from harness.core.run_environment import RunEnvironment

CONFIGS = {
    "baseline": {},
    "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True},
}
ENV = {"torch_version": "2.13.0.dev20261101+cpu", "torch_git": "0123456789abcdef", "transformers_version": "5.23.0",
       "python_version": "3.11.7", "device": "cpu", "cuda_version": None, "flagsweep_version": "0.1.0",
       "recipe_fingerprint": "r1"}
PENDING = "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN} not in returned outputs"
GUARD = "GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(uN, 0)"


def ok(model: str, config: str, graphs: int, stratum: str = "decoder_llm", fp: str = "fp") -> Outcome:
    """A compiled item."""
    return Outcome(model=model, config=config, status="ok", graphs=graphs, stratum=stratum, fingerprint=fp,
                   graph_breaks=max(graphs - 1, 0), compile_s=0.5)


def crash(model: str, config: str, sig: str = PENDING, stratum: str = "decoder_llm", fp: str = "fp",
          status: str = "error") -> Outcome:
    """A crashed item with a realistic message (a mention and HTML inside, as foreign text can carry)."""
    etype = sig.split(":")[0]
    return Outcome(model=model, config=config, status=status, stratum=stratum, fingerprint=fp, error_type=etype,
                   error_message=f"{sig} <class 'torch.SymInt'> @someone", signature=sig,
                   torch_frame="torch/_dynamo/variables/builder.py:wrap_unspecialized_primitive",
                   traceback="Traceback (most recent call last):\n  ...")


def store_run(conn: sqlite3.Connection, outcomes: Iterable[Outcome], *, configs: dict | None = None,
              kind: str = "sweep", nightly: str | None = None, shard: str | None = None,
              base_settings: dict | None = None, env: dict | None = None, finish: bool = True,
              options: RunOptions = RunOptions()) -> int:
    """Create, fill, finish and finalize a run the way the engine does (`options`: how it ran, e.g. its mode)."""
    outcomes = list(outcomes)
    rid = runs.create_run(conn, environment=RunEnvironment.from_dict(env or ENV),
                          models=sorted({o.model for o in outcomes}),
                          configs=configs or CONFIGS, base_settings=base_settings, kind=kind, nightly=nightly,
                          shard=shard, options=options)
    for o in outcomes:
        runs.record_outcome(conn, rid, o)
    if finish:
        runs.finish_run(conn, rid)
        history.finalize_run(conn, rid)
    return rid


def night(graphs_a: int = 4, b_crashes: bool = False, c_crashes: bool = True) -> list[Outcome]:
    """One night of three models under baseline and capture_scalar_outputs."""
    cso = "capture_scalar_outputs"
    return [
        ok("LlamaForCausalLM", "baseline", 4), ok("LlamaForCausalLM", cso, graphs_a),
        ok("BertModel", "baseline", 2, stratum="encoder_decoder"),
        crash("BertModel", cso, stratum="encoder_decoder") if b_crashes else ok("BertModel", cso, 2, "encoder_decoder"),
        ok("Qwen2VLForConditionalGeneration", "baseline", 6, stratum="vl_multimodal"),
        crash("Qwen2VLForConditionalGeneration", cso, stratum="vl_multimodal") if c_crashes
        else ok("Qwen2VLForConditionalGeneration", cso, 3, stratum="vl_multimodal"),
    ]
