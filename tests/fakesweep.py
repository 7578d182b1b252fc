"""A cheap twin of the nightly's expensive steps: a "torch" whose outcomes the test sets, stored like a real sweep."""
from __future__ import annotations

import sys

from bot.pipeline import steps as steps_mod
from bot.builds.provider import Nightly
from bot.github.publish import PublishSummary
from harness.core.options import RunOptions, SweepOptions
from harness.core.outcome import Outcome
from harness.core.run_environment import RunEnvironment
from harness.engine.engine import SweepRequest
from state import history, runs

CONFIGS = {"baseline": {}, "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True}}
MODELS = ["AlphaModel", "BetaForCausalLM", "GammaModel", "DeltaModel", "EpsilonModel"]


class World:
    """What each fake nightly does: outcome per (model, config), per torch version."""

    def __init__(self):
        self.version = "2.14.0.dev20261121+cpu"
        self.date = "2026-11-21"
        self.crashing: set[str] = set()     # models that crash under the flag
        self.crashing_in: dict[str, set[str]] = {}   # mode name -> models that crash under the flag in that mode only
        self.one_graph: set[str] = set()    # models that compile to one graph at baseline (no graph break)
        self.compiles = 0                   # items actually run (not reused from a baseline pass)
        self.sweeps = []
        self.published = []
        self.views = []                     # the run views handed to publish and report, in order
        self.pruning = None                 # what the last sweep was told it may prune
        self.git = "g"                      # the torch commit the sweeps' environment records
        self.mode = "eval"

    def provide(self, settings, torch, date, progress):
        return Nightly(version=self.version, git="g" + self.date[-2:], python=sys.executable, date=self.date)

    def outcome(self, model, config):
        if config != "baseline" and (model in self.crashing or model in self.crashing_in.get(self.mode, ())):
            # stored as flake confirmation leaves a confirmed crash (the first run and two re-runs failed)
            return Outcome(model, config, "error", stratum="decoder_llm", error_type="RuntimeError",
                           error_message="boom u3", signature="RuntimeError: boom uN", attempts=3)
        baseline = 1 if model in self.one_graph else 2
        return Outcome(model, config, "ok", stratum="decoder_llm", graphs=baseline if config == "baseline" else 1)

    def sweep(self, conn, request: SweepRequest) -> runs.Run:
        self.sweeps.append((request.nightly, request.shard, tuple(request.models)))
        self.pruning = request.pruning
        self.mode = request.options.mode.name      # the mode being swept (crashing_in)
        env = RunEnvironment(torch_version=self.version, torch_git=self.git, transformers_version="5.23.0",
                             python_version="3.11", device="cpu", flagsweep_version="0.1.0", recipe_fingerprint="f",
                             python=request.options.python)
        rid = runs.create_run(conn, environment=env.with_build(request.build) if request.build else env,
                              models=request.models, configs=request.configs, base_settings=request.base_settings,
                              kind=request.kind, nightly=request.nightly, shard=request.shard,
                              options=RunOptions(SweepOptions(mode=request.options.mode),
                                                 population=request.population or None))
        had = {(o.model, o.config): o for o in request.prior}
        for m in request.models:
            for c in request.configs:
                if (m, c) not in had:
                    self.compiles += 1
                runs.record_outcome(conn, rid, had.get((m, c)) or self.outcome(m, c))
        runs.finish_run(conn, rid)
        history.finalize_run(conn, rid)     # whoever ends a run finalizes it, as the engine does
        return runs.get_run(conn, rid)

    def publish(self, conn, settings, view, *, publisher, dry_run, out_dir) -> PublishSummary:
        self.published.append(view.id)
        self.views.append(view)
        return PublishSummary(run_id=view.id, dry_run=dry_run, repo=None)

    def steps(self, real_publish: bool = False):
        """Pipeline steps with this world's provider and sweep (and the real publisher when asked)."""
        return steps_mod.Steps(provide=self.provide, resolve_models=lambda pats: list(pats or MODELS),
                               select_configs=self.select_configs, sweep=self.sweep, confirm=self.confirm,
                               publish=steps_mod.publish if real_publish else self.publish, report=self.report)

    def select_configs(self, settings, names):
        return {k: v for k, v in CONFIGS.items() if k == "baseline" or k in names}

    def confirm(self, conn, run_id, result, settings, python):
        return result

    def report(self, conn, view, out_dir, precision=None):
        self.views.append(view)
        return out_dir / "report.html"
