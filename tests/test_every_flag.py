"""Every flag (issue 22): the read-set recorder, pruned pairs stored as not_read, the audit turning pruning off,
config-space discovery diffs between two builds, and the exclusion table.

The stand-in build (tests/standin_build/sitecustomize.py, under this venv's Python) makes `allow_rnn` crash every
compile without reading it through the config module, and declares one key the real build lacks.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.core.effects import effects_for
from harness.engine.flags import sets as flagsets, space as configspace
from harness.engine.engine import SweepRequest
from harness.engine.configs import BUILTIN, ConfigError
from harness.engine.engine import SweepOptions, sweep
from harness.engine.flags.pruning import Pruning
from harness.core.run_environment import RunEnvironment
from state import flags as stored_space
from state import db, history, runs
from state import flags as pruning

STANDIN = Path(__file__).with_name("standin_build")
READ = "torch._dynamo.config.capture_scalar_outputs"   # TinyItemModel's .item() makes Dynamo read it
UNREAD = "torch._dynamo.config.allow_rnn"               # nothing in a two-layer MLP asks about RNNs
CONFIGS = {"baseline": {}, "scalars": {READ: True}, "rnn": {UNREAD: True}}
MODEL = "TinyItemModel"


def _standin_python(tmp_path: Path) -> str:
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{STANDIN}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return str(script)


def _options(python: str | None = None) -> SweepOptions:
    return SweepOptions(workers=1, timeout=120, python=python, extra_modules=["tests.fault_models"])


@pytest.mark.compile
def test_recorder_pruning_and_audit_on_a_real_compile(tmp_path):
    conn = db.connect(tmp_path / "state.sqlite")
    python = _standin_python(tmp_path)
    no_audit = Pruning(frozenset({"scalars", "rnn"}), audit=0.0, audit_min=0)
    first = sweep(conn, SweepRequest(models=[MODEL], configs=CONFIGS, base_settings={}, options=_options(python),
                  progress=False, pruning=no_audit)).run.id
    # The recorder: the baseline read the flag the model's .item() asks about, never the RNN one.
    reads = pruning.reads(conn, first)[MODEL]
    assert reads[READ] is False and UNREAD not in reads
    outs = {o.config: o for o in runs.outcomes(conn, first)}
    assert outs["scalars"].reason is None and outs["scalars"].graphs == 1     # traced: one graph, no break
    assert outs["rnn"].reason == "not_read" and outs["rnn"].graphs == outs["baseline"].graphs == 2
    effects = {e.config: e for e in history.effects(conn, first)}
    assert (effects["rnn"].effect, effects["rnn"].reason) == ("no_effect", "not_read")
    assert effects["scalars"].effect == "reduces_graphs" and effects["scalars"].reason is None

    # The audit traces the pruned pair: under the stand-in build it crashes, so pruning goes off for the key.
    audited = sweep(conn, SweepRequest(models=[MODEL], configs=CONFIGS, base_settings={}, options=_options(python),
                    progress=False, pruning=Pruning(frozenset({"scalars", "rnn"}), audit=1.0, audit_min=20))).run.id
    summary = pruning.audit_summary(conn, audited)
    assert (summary.audited, summary.agreed, summary.agreement) == (1, 0, 0.0)
    assert summary.turned_off == ((UNREAD, "rnn", MODEL),)
    traced = {o.config: o for o in runs.outcomes(conn, audited)}["rnn"]
    assert traced.reason is None and traced.status == "error" and "allow_rnn" in traced.error_message
    assert {e.config: e.effect for e in history.effects(conn, audited)}["rnn"] == "crashes"
    assert pruning.disabled_keys(conn) == {UNREAD}

    # From then on the flag is traced, audit or not.
    later = sweep(conn, SweepRequest(models=[MODEL], configs=CONFIGS, base_settings={}, options=_options(python),
                  progress=False, pruning=no_audit)).run.id
    assert {o.config: o.reason for o in runs.outcomes(conn, later)} == {"baseline": None, "scalars": None, "rnn": None}
    assert {e.config: e.effect for e in effects_for(runs.outcomes(conn, later))}["rnn"] == "crashes"


@pytest.mark.compile
@pytest.mark.compile
def test_flags_the_baseline_read_are_pooled_and_split_where_the_pool_differs(tmp_path):
    """Four read flags compiled together differ from the baseline (one removes a graph break): halves, then
    singles, are traced; the half that matches the baseline is stored as it, reason "pooled"."""
    conn = db.connect(tmp_path / "state.sqlite")
    flags = {"scalars": {READ: True},
             "gc": {"torch._dynamo.config.run_gc_after_compile": False},
             "lazy": {"torch._dynamo.config.use_lazy_graph_module": False},
             "cache": {"torch._dynamo.config.fake_tensor_cache_enabled": False},
             "rnn": {UNREAD: True}}
    configs = {"baseline": {}, **flags}
    rid = sweep(conn, SweepRequest(models=[MODEL], configs=configs, base_settings={}, options=_options(), progress=False,
                pruning=Pruning(frozenset(flags), audit=0.0, audit_min=0))).run.id
    outs = {o.config: o for o in runs.outcomes(conn, rid)}
    assert {c: (outs[c].reason, outs[c].graphs) for c in flags} == {
        "scalars": (None, 1), "gc": (None, 2),                 # the pool of four differed, then [scalars, gc]
        "lazy": ("pooled", 2), "cache": ("pooled", 2),          # the other half matched the baseline
        "rnn": ("not_read", 2)}
    effects = {e.config: e for e in history.effects(conn, rid)}
    assert effects["lazy"].effect == "no_effect" and effects["lazy"].reason == "pooled"
    assert effects["scalars"].effect == "reduces_graphs"
    alone = sweep(conn, SweepRequest(models=[MODEL], configs=configs, base_settings={}, options=_options(), progress=False,
                  pruning=Pruning(frozenset(flags), audit=0.0, audit_min=0, pool=False))).run.id
    assert {o.config: o.reason for o in runs.outcomes(conn, alone) if o.config in flags} == {
        "scalars": None, "gc": None, "lazy": None, "cache": None, "rnn": "not_read"}   # no pools: each traced


def test_discovery_diff_between_two_builds(tmp_path):
    conn = db.connect(tmp_path / "state.sqlite")
    ids = []
    for name, python in (("real", None), ("standin", _standin_python(tmp_path))):
        modules, entries = configspace.discover("count", python)
        env = RunEnvironment(torch_version="2.13.0", torch_git=name)    # two builds of one version
        stored_space.record_space(conn, env, modules, entries)
        ids.append(runs.create_run(conn, environment=env, models=[], configs={}))
    assert stored_space.change_since_previous(conn, ids[0]) is None
    change = stored_space.change_since_previous(conn, ids[1])
    assert change.added == ("torch._dynamo.config.standin_only_flag",) and change.removed == ()
    modules, entries = stored_space.space_of_run(conn, ids[0])
    assert modules == ["torch._dynamo.config", "torch._functorch.config"]
    assert entries[READ] == {"type": "bool", "default": False, "deprecated": False}


def test_exclusion_table_refuses_an_unknown_reason(tmp_path):
    bad = tmp_path / "exclusions.toml"
    bad.write_text('[[exclude]]\nkey = "torch._dynamo.config.verbose"\nreason = "too noisy"\n')
    with pytest.raises(ConfigError) as err:
        flagsets.load_exclusions(bad)
    assert str(err.value) == ("exclusions.toml: exclude #1: torch._dynamo.config.verbose: unknown reason 'too noisy' "
                              "(one of debugging, changes_measurement, needs_another_flag, out_of_scope)")
    assert "\n" not in str(err.value)
    shipped = flagsets.load_exclusions()
    assert shipped["torch._dynamo.config.suppress_errors"].reason == "changes_measurement"


def test_named_set_flips_every_public_boolean_but_the_excluded():
    space = {
        "torch._dynamo.config.capture_scalar_outputs": {"type": "bool", "default": False},
        "torch._dynamo.config.brand_new_flag": {"type": "bool", "default": True},     # unknown: included
        "torch._dynamo.config.verbose": {"type": "bool", "default": False},           # excluded
        "torch._dynamo.config._private": {"type": "bool", "default": False},
        "torch._dynamo.config.old": {"type": "bool", "default": False, "deprecated": True},
        "torch._dynamo.config.recompile_limit": {"type": "int", "default": 8},
        "torch._functorch.config.other_module": {"type": "bool", "default": False},
    }
    configs = flagsets.expand("all-dynamo", space, flagsets.load_exclusions())
    assert configs == {"capture_scalar_outputs": BUILTIN["capture_scalar_outputs"],
                       "dynamo.brand_new_flag": {"torch._dynamo.config.brand_new_flag": False}}


def test_all_inductor_without_the_inductor_backend_is_refused_in_one_line(tmp_path, capsys):
    from bot.cli.main import main

    code = main(["--state", str(tmp_path / "s.sqlite"), "sweep", "--models", "BertModel", "--configs", "all-inductor"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and err == ["flagsweep sweep: all-inductor needs --backend inductor "
                                 "(no other backend reads an Inductor flag)"]


def test_an_empty_exclusion_table_is_refused_not_read_as_nothing_excluded(tmp_path):
    """Issue 31: an emptied exclusions.toml silently meant "nothing excluded" (debugging flags swept)."""
    empty = tmp_path / "exclusions.toml"
    empty.write_text("# every entry deleted by mistake\n")
    with pytest.raises(ConfigError, match=r"exclusions\.toml: the exclusion table has no \[\[exclude\]\] entries$"):
        flagsets.load_exclusions(empty)


def test_an_exclusion_the_torch_under_test_lacks_is_one_warning_naming_the_key(tmp_path, caplog):
    """Issue 31: a key that matches nothing in the torch under test (a typo, a key a newer torch removed) was
    silently ignored. Expanded in the real torch: the typo is named, the keys it has and other modules' are not."""
    table = tmp_path / "exclusions.toml"
    table.write_text('[[exclude]]\nkey = "torch._dynamo.config.verbose"\nreason = "debugging"\n'
                     '[[exclude]]\nkey = "torch._dynamo.config.verbsoe"\nreason = "debugging"\n'
                     '[[exclude]]\nkey = "torch._inductor.config.not_listed_under_count"\nreason = "debugging"\n')
    caplog.set_level("WARNING", logger="harness.engine.flags.sets")
    flips = flagsets.expand_named(["all-dynamo"], backend="count", python=None, table=table)
    assert flips and "dynamo.verbose" not in flips
    warned = [r.getMessage() for r in caplog.records]
    assert warned == ["exclusions.toml: torch._dynamo.config.verbsoe matches no flag of the torch under test "
                      "(a typo, or a key this build removed)"]


def test_listing_the_config_space_in_an_interpreter_without_torch_fails_first(tmp_path):
    """Issue 31: list_here swallowed the ImportError, so `all-dynamo` expanded to 0 flags before failing later."""
    no_torch = _python_without_torch(tmp_path)
    with pytest.raises(ConfigError, match=r"cannot list its config space: .*No module named 'torch'"):
        configspace.discover("count", no_torch)
    with pytest.raises(ConfigError, match=r"No module named 'torch'"):
        flagsets.expand_named(["all-dynamo"], backend="count", python=no_torch)


def _python_without_torch(tmp_path: Path) -> str:
    """This interpreter without its site-packages (-S): the project imports, torch does not."""
    script = tmp_path / "python-without-torch"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_the_pruning_audits_part_in_the_groups_and_the_part_after_make_its_size():
    from harness.engine.flags import pruning as rules

    audit = Pruning(frozenset(), audit=0.05, audit_min=20, seed=4)
    orders, quota = rules.in_group(["A", "B", "C"], [f"f{i}" for i in range(10)], audit)
    # Each model's configs in its own seeded order; its share of the size over every prunable pair (20 of 30).
    assert quota == 7 and all(sorted(o) == [f"f{i}" for i in range(10)] for o in orders.values())
    assert orders == rules.in_group(["A", "B", "C"], [f"f{i}" for i in reversed(range(10))], audit)[0]
    pairs = [(m, f"f{i}") for m in "ABCDE" for i in range(20)]
    assert len(rules.sample(pairs, audit)) == 20
    assert len(rules.sample(pairs, audit, already=15)) == 5 and rules.sample(pairs, audit, already=21) == []
