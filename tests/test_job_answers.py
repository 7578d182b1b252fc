"""An engine job's answer crosses from the worker whole, whatever numbers it holds (one real worker)."""
from __future__ import annotations

import math

from harness.engine.engine import SweepOptions, run_job


def test_a_jobs_answer_holding_nan_or_an_infinity_comes_back_whole():
    # A record's numbers must be finite (harness.core.record): on the way as a record, this answer aborted the run.
    (found,) = run_job("tests.zoo_extra_models:not_finite", ["BertModel"], options=SweepOptions(workers=1, timeout=120))
    assert (found.status, found.error) == ("ok", None)
    assert math.isnan(found.data["max_error"]) and found.data["limits"] == [0.0, math.inf, -math.inf]
    assert found.data["model"] == "BertModel"
