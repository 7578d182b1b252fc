"""The pruning audit's traces with the checks on, stored as the sweep stores its items (one real sweep of TinyLM)."""
from __future__ import annotations

import pytest

from harness.core.options import Accuracy
from harness.core.outcome import ANSWERED
from harness.engine.engine import SweepOptions, SweepRequest, sweep
from harness.engine.flags import answering
from harness.engine.flags.pruning import Pruning
from state import db, flags, runs

pytestmark = pytest.mark.compile


def test_an_item_the_pruning_audit_answers_is_stored_with_its_rule(tmp_path):
    conn = db.connect(tmp_path / "state.sqlite")
    configs = {"baseline": {}, "rnn": {"torch._dynamo.config.allow_rnn": True}}   # TinyLM never asks about RNNs
    options = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"],
                           accuracy=Accuracy(answer_audit=0.0, answer_audit_min=0))
    run = sweep(conn, SweepRequest(models=["TinyLM"], configs=configs, options=options, progress=False,
                                   pruning=Pruning(frozenset({"rnn"})))).run
    rnn, = [o for o in runs.outcomes(conn, run.id) if o.config == "rnn"]
    # Pruned, then traced by the audit (the least it traces is every pair here), its later calls answered ...
    assert flags.audit_summary(conn, run.id).audited == 1 and rnn.reason == ANSWERED
    # ... and stored with the rule that answered them, as an item answered in the sweep is.
    assert flags.answered(conn, run.id) == {("TinyLM", "rnn"): answering.RULE_GRAPHS}
