"""Helpers of the verify-step tests: a stored run as the store reads it back, the shrink twin (a runner that
answers like a crash needing a minimum model size), and a counter of process starts."""
from __future__ import annotations

import _posixsubprocess
import copy
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from bot.verify import oracle
from bot.verify.script import render_script
from harness.core.effects import effects_for
from harness.core.model_build import ModelBuild
from harness.core.options import RunOptions, SweepOptions
from harness.core.run_environment import RunEnvironment
from harness.core.tracking import tracking_groups
from harness.engine.script_runner import ScriptResult
from state import db, runs
from state.runs import Run
from tests.checks_runner import answering_checks
from tests.fakegithub import scenario as sc

ENV = {"python": "/nightly/bin/python", "torch_version": "2.14.0.dev20261121+cpu", "torch_git": "abc"}


def a_run(env: dict | None = None, backend: str = "count") -> Run:
    """A finished nightly as the store reads it back (what the verify step hands the reproducers)."""
    return Run(id=1, kind="nightly", status="finished", started_at="2026-11-21T03:00:00+00:00", finished_at=None,
               models=sorted(sc.corpus()), configs=sc.CONFIGS, base_settings={},
               options=RunOptions(SweepOptions(backend=backend, device="cpu")), environment=RunEnvironment.from_dict(env or ENV))


SIG = sc.SIG_A
PY = "/nightly/bin/python"
# A stored build shaped like the zoo's MimiModel entry (sub-config added to reach the nested rules).
BUILD = ModelBuild(
    model="MimiModel", config_class="MimiConfig", seed=0, fingerprint="fp", transformers_version="5.23.0",
    config={"hidden_size": 64, "intermediate_size": 128, "head_dim": 16, "num_attention_heads": 4,
               "num_key_value_heads": 4, "num_hidden_layers": 2, "num_quantizers": 32, "codebook_size": 128,
               "codebook_dim": 256, "sliding_window": 250, "use_cache": False, "model_type": "mimi",
               "vocab_size": 1000, "pad_token_id": 3,
               "text_config": {"model_type": "t", "num_hidden_layers": 4, "hidden_size": 32, "num_attention_heads": 2,
                               "layer_types": ["full", "full", "full", "full"]}},
    spec={"input_values": {"kind": "randn", "shape": [2, 1, 8000]},
          "input_ids": {"kind": "ids", "shape": [2, 16], "high": 1000},
          "padding_mask": {"kind": "ones", "shape": [2, 16]}},
)


def stored_build(model: str) -> ModelBuild:
    """What a worker stores for a zoo model (harness/engine/worker.py _repro_data), read from its lock entry here:
    no worker started, no model built."""
    import transformers

    from harness.zoo.build import SEED, entry, fingerprint

    e = entry(model)
    return ModelBuild(model, e["config_class"], e["config"], e["spec"], SEED, fingerprint(model),
                      transformers.__version__)


def params(b: ModelBuild) -> int:
    c = b.config
    return c["hidden_size"] * c["intermediate_size"] * c["num_hidden_layers"] + c["codebook_size"] * c["codebook_dim"]


class Twin:
    """Crashes with SIG while the build is big enough and consistent; another signature otherwise."""

    def __init__(self, clock: list[float] | None = None, cost: float = 0.0, needs_window: bool = True,
                 eager_needs_batch: bool = False) -> None:
        self.needs_window, self.eager_needs_batch = needs_window, eager_needs_batch
        self.modes: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.clock, self.cost = clock, cost

    def __call__(self, b, under, python, timeout, mode="flag"):
        if mode == oracle.CHECKS:            # the three modes in one run, as the real script answers
            return answering_checks(self)(b, under, python, timeout, mode)
        assert python == PY and timeout > 0
        if self.clock is not None:
            self.clock[0] += self.cost
        self.modes.append(mode)
        c, spec = b.config, b.spec
        if mode != "flag":        # eager and baseline: valid unless the inputs disagree (like Qwen2-VL's image grid)
            bad = self.eager_needs_batch and spec["input_values"]["shape"][0] != spec["input_ids"]["shape"][0]
            return render_script(b, under.settings, baseline=under.baseline), (
                ScriptResult(status="error", signature="RuntimeError: split_with_sizes expects split_sizes to sum")
                if bad else ScriptResult(status="ok", signature=None))
        self.calls.append(copy.deepcopy(b))
        result = ScriptResult(status="error", signature=SIG, parameters=params(b), seconds=params(b) / 1e4)
        if c["hidden_size"] % c["num_attention_heads"]:
            result = replace(result, signature="ValueError: hidden_size is not a multiple of num_attention_heads")
        elif spec["input_values"]["shape"][2] < 960:
            result = replace(result, signature="RuntimeError: input is shorter than the conv stack")
        elif self.needs_window and "sliding_window" not in c:
            result = replace(result, status="ok", signature=None)  # the crash needs the window: never drop it
        elif "padding_mask" not in spec:
            result = replace(result, signature="KeyError: padding_mask")
        self.results.append(result)
        return render_script(b, under.settings, baseline=under.baseline), result


def five_model_groups():
    """(outcomes, tracking groups) of the scenario's first five models: three confirmed signatures."""
    outs = [sc.outcome(m, c, spec.get(c, spec.get("baseline", 3)), "decoder_llm")
            for m, spec in sorted(sc.corpus(5).items()) for c in sc.CONFIGS]
    return outs, tracking_groups(effects_for(outs), outs)


def sig_twin(twin: Twin):
    """The twin for every group: the config's settings and the model name pick the signature the sweep saw."""
    def runner(b, under, *rest):
        script, result = twin(b, under, *rest)
        if result.signature == SIG:
            if "torch._dynamo.config.capture_dynamic_output_shape_ops" in under.settings:
                result = replace(result, signature=sc.SIG_C)
            elif b.model == "Model02ForCausalLM":
                result = replace(result, signature=sc.SIG_B)
        return script, result
    return answering_checks(runner)


def build_of(model: str) -> ModelBuild:
    """The MimiModel-shaped stored build under another model's name."""
    return replace(copy.deepcopy(BUILD), model=model)


RUN = a_run({"python": PY, "torch_version": "2.13.0", "torch_git": "abc"})


def verify_setup() -> tuple[Any, Any, dict[str, Any]]:
    """(outcomes, groups, builds) of three confirmed signatures over five models."""
    outs, groups = five_model_groups()
    return outs, groups, {m: build_of(m) for m in sc.corpus(5)}


def store_run(tmp_path: Path):
    """A finalized nightly with three crash groups, its interpreter and build data stored: (connection, run id)."""
    conn = db.connect(tmp_path / "state.sqlite")
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus(5), env={**sc.ENV, "python": PY})
    for model in sc.corpus(5):
        runs.record_model(conn, run_id, build_of(model))
    conn.commit()
    return conn, run_id


class ProcessStarts:
    """Every way this process could start another, wrapped: each start is recorded, then made as asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        self._wrap(monkeypatch, subprocess.Popen, "__init__", "Popen")
        self._wrap(monkeypatch, _posixsubprocess, "fork_exec", "fork_exec")   # subprocess and multiprocessing spawn
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "spawnv", "spawnve"):
            self._wrap(monkeypatch, os, name, f"os.{name}")

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, label: str) -> None:
        real: Callable[..., Any] = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.seen.append(label)
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
