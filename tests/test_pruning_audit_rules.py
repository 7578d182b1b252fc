"""The pruning audit with the checks on, drawn in the sweep's own group (one real sweep of TinyLM): its trace stored as
the sweep stores its items, with nothing traced again after the sweep."""
from __future__ import annotations

import pytest

from harness.core.options import Accuracy
from harness.core.outcome import ANSWERED
from harness.engine import engine
from harness.engine.engine import SweepOptions, SweepRequest, sweep
from harness.engine.flags import answering
from harness.engine.flags.pruning import Pruning
from state import db, flags, runs

pytestmark = pytest.mark.compile


def test_the_pruning_audit_traces_in_the_group_where_the_baseline_is_and_stores_the_rule(tmp_path, monkeypatch):
    conn = db.connect(tmp_path / "state.sqlite")
    after: list[list[tuple[str, str]]] = []   # whatever is traced after the sweep (a new pool, the model built again)
    monkeypatch.setattr(engine, "trace_items", lambda items, **kw: after.append(items) or [])
    monkeypatch.setattr(engine, "run_items", lambda items, **kw: after.append(items) or [])
    configs = {"baseline": {}, "rnn": {"torch._dynamo.config.allow_rnn": True}}   # TinyLM never asks about RNNs
    options = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"],
                           accuracy=Accuracy(answer_audit=0.0, answer_audit_min=0))
    run = sweep(conn, SweepRequest(models=["TinyLM"], configs=configs, options=options, progress=False,
                                   pruning=Pruning(frozenset({"rnn"})))).run
    rnn, = [o for o in runs.outcomes(conn, run.id) if o.config == "rnn"]
    # Pruned, then traced by the audit (the least it traces is every pair here) in the sweep's own group ...
    summary = flags.audit_summary(conn, run.id)
    assert (summary.audited, summary.agreed) == (1, 1) and after == []
    # ... its later calls answered by the screen from the baseline there, and stored with the rule that answered them,
    # as an item answered in the sweep is (as the answer audit's sample of its config, made in full too: it agreed).
    assert rnn.reason == ANSWERED and len(rnn.calls) == 4
    assert flags.answered(conn, run.id) == {("TinyLM", "rnn"): answering.RULE_GRAPHS}
    assert flags.answer_audit(conn, run.id) == [flags.AnswerFinding("TinyLM", "rnn", None)]
