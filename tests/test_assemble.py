"""One assembler of a sweep for `flagsweep sweep` and the nightly: the pruning rule, and the baseline pass both use.

The rule's inputs are what differs between the callers: the command line's `--prune` (None when not given), the
nightly never asks. The table below is what each caller decided before the assembler existed.
"""
import pytest

from bot.pipeline import assemble
from bot.pipeline.sampling import Pick
from harness.core.run_environment import BuildOrigin
from harness.engine.engine import SweepOptions, SweepRequest
from harness.engine.flags.pruning import Pruning
from state import db, runs
from tests.fakesweep import World

CATALOG = {"baseline": {}, "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True}}
FLIPS = {"dynamo.allow_rnn": {"torch._dynamo.config.allow_rnn": True}}


@pytest.mark.parametrize("flips, prune, prunable", [
    (FLIPS, None, set(FLIPS)),                         # a named set (CLI default, and every nightly): its flips
    ({}, None, None),                                  # configs named one by one: off (CLI default, nightly)
    (FLIPS, False, None),                              # --prune off
    ({}, True, set(CATALOG)),                          # --prune on over catalog configs: every config
    (FLIPS, True, set(FLIPS)),                         # --prune on with a named set: its flips
])
def test_one_pruning_rule_with_prune_as_an_input(flips, prune, prunable):
    got = assemble.pruning({**CATALOG, **flips}, flips, prune=prune, audit=0.1, seed=7)
    assert got == (None if prunable is None else Pruning(frozenset(prunable), audit=0.1, seed=7))


def test_the_baseline_pass_is_the_request_on_baseline_alone_and_its_outcomes_are_the_prior(tmp_path):
    world = World()
    world.one_graph = {"AlphaModel"}
    conn = db.connect(tmp_path / "s.sqlite")
    said = []
    request = SweepRequest(models=[], configs=dict(CATALOG), options=SweepOptions(), kind="nightly", nightly="2026-11-21",
                           build=BuildOrigin(index="i", channel=None), pruning=Pruning(frozenset({"capture_scalar_outputs"})))
    drawn = assemble.draw(conn, world.steps(), request, [Pick("AlphaModel"), Pick("BetaForCausalLM")],
                          population="graph-breaking", sample=None, seed=0, torch_version=world.version, say=said.append)
    (baseline,) = runs.list_runs(conn)
    assert (baseline.kind, baseline.nightly, baseline.configs, baseline.models) == (
        "baseline", None, {"baseline": {}}, ["AlphaModel", "BetaForCausalLM"])
    assert baseline.environment.torch_index == "i" and world.pruning is None
    assert said == ["baseline pass over 2 models to find the graph-breaking ones"]
    assert drawn.models == ["BetaForCausalLM"] and [(o.model, o.config) for o in drawn.prior] == [
        ("BetaForCausalLM", "baseline")]
    assert (drawn.kind, drawn.nightly, drawn.pruning, drawn.population["source"]) == (
        "nightly", "2026-11-21", request.pruning, f"baseline pass (run {baseline.id})")
