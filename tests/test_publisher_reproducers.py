"""Verified reproducers: smallest model chosen, embedded only on the same signature, verdicts cached."""
from __future__ import annotations

from pathlib import Path

from bot.issues import planner
from bot.verify import reproducers
from harness.core.effects import effects_for
from tests.fakegithub import scenario as sc

CSO = "capture_scalar_outputs"


def setup():
    outs = [sc.outcome(m, c, spec.get(c, spec.get("baseline", 3)), "decoder_llm")
            for m, spec in sorted(sc.corpus().items()) for c in sc.CONFIGS]
    outs[0].ops = 500                    # Model00 baseline is big: Model01 is the smallest crashing with A
    groups = planner.tracking_groups(effects_for(outs), outs)
    run = {"configs": sc.CONFIGS, "base_settings": {}, "options": {"backend": "count", "device": "cpu"},
           "environment": {"python": "/nightly/bin/python", "torch_version": "2.14.0.dev20261121+cpu", "torch_git": "abc"}}
    builds = {m: {"model": m, "config_class": "X"} for m in sc.corpus()}
    return outs, groups, run, builds


def test_same_signature_confirms_other_does_not_and_verdicts_are_cached(tmp_path: Path) -> None:
    outs, groups, run, builds = setup()
    calls = []

    def runner(built, settings, backend, device, python, timeout):
        model = built["model"]
        calls.append(model)
        assert python == "/nightly/bin/python"            # the run's own interpreter, from its environment
        if model == "Model01ForCausalLM":
            return "print('repro A')\n", {"status": "error", "signature": sc.SIG_A, "torch_version": "2.14.0.dev20261121+cpu",
                                          "torch_git": "abc"}
        if model == "Model02ForCausalLM":
            return "print('repro B')\n", {"status": "ok", "graphs": 1, "signature": None}
        return "x", {"status": "error", "signature": "SomethingElse: entirely"}

    cache = tmp_path / "repro-cache.json"
    v = reproducers.verify_all(groups, outs, run, builds, cache_path=cache, runner=runner)
    a, b, c = (v[planner.tracking_key(CSO, sc.SIG_A)], v[planner.tracking_key(CSO, sc.SIG_B)],
               v[planner.tracking_key("capture_dynamic_output_shape_ops", sc.SIG_C)])
    assert a == {"status": "confirmed", "model": "Model01ForCausalLM", "reason": "", "script": "print('repro A')\n",
                 "torch_version": "2.14.0.dev20261121+cpu", "torch_git": "abc"}
    assert b["status"] == "unconfirmed" and "without crashing" in b["reason"] and b["script"] == ""
    assert c["status"] == "unconfirmed" and "another signature" in c["reason"]
    assert sorted(calls) == ["Model00ForCausalLM", "Model01ForCausalLM", "Model02ForCausalLM"]
    again = reproducers.verify_all(groups, outs, run, builds, cache_path=cache, runner=runner)
    assert again == v and len(calls) == 3                     # nothing re-run: all from the cache
    # Another torch build is another verdict: nothing is reused from the cache.
    run["environment"] = {**run["environment"], "torch_git": "def"}
    reproducers.verify_all(groups, outs, run, builds, cache_path=cache, runner=runner)
    assert len(calls) == 6


def test_a_broken_generator_is_reported_not_cached(tmp_path: Path) -> None:
    outs, groups, run, builds = setup()

    def broken(*args):
        raise RuntimeError("no such model in this transformers")

    v = reproducers.verify_all(groups, outs, run, builds, cache_path=tmp_path / "c.json", runner=broken)
    assert all(x["status"] == "unconfirmed" and "could not be generated" in x["reason"] for x in v.values())
    assert not (tmp_path / "c.json").exists()


def test_verdict_rules() -> None:
    assert reproducers.verdict({"status": "timeout", "signature": None}, "timeout") == ("confirmed", "")
    assert reproducers.verdict({}, "x")[0] == "unconfirmed"


def test_nothing_stored_for_a_model_is_reported_not_cached(tmp_path: Path) -> None:
    """The default runner renders from stored data only: a model the run stored nothing for is "not generated"."""
    outs, groups, run, _ = setup()
    v = reproducers.verify_all(groups, outs, run, {}, cache_path=tmp_path / "c.json")
    assert all(x["status"] == "unconfirmed" and "stored no build data" in x["reason"] for x in v.values())
    assert not (tmp_path / "c.json").exists()
