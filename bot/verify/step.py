"""The verify step of the pipeline: verify → shrink → isolate → the maintainer's script, and store the verdicts.

Runs after flake confirmation and the range search, before the run view is loaded
for publishing: publishing only reads what this step stored (state/verdicts.py).
Each tracking group (harness.core.tracking) gets the verdict of its smallest
affected model's reproducer (bot/verify/reproducers.py: reused when stored for the
same key, else run, and shrunk when confirmed) and the component of its crash
(bot/verify/isolate.py); a confirmed verdict then gets the maintainer's script and its dynamic ablation
(bot/verify/ablation.py), once. A wrong result's group (harness.core.tracking `wrong_result_groups`, but not a
flag unsafe by its own documentation: its wrong results are never filed) gets the verdict of its accuracy
reproducer the same way (verified, shrunk); it has no component and no maintainer's script besides (the accuracy
reproducer is one already). With verification off, the run's groups get no verdict
("not run for this publish") and only components known by construction.
"""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Callable

from bot.verify import ablation, isolate, reproducers
from bot.verify.bar import StepBar
from bot.verify.context import StepContext
from bot.verify.cost import Meter
from bot.verify.steps import VerifySteps
from bot.settings import VerifySettings
from bot.view import run_view
from harness.core import unsafe
from harness.core.tracking import tracking_groups, wrong_result_groups
from state import verdicts
from state.verdicts import RunVerdict, StepCost

log = logging.getLogger(__name__)
OLD_CACHE = "repro-cache.json"   # where verdicts were kept beside the store before they moved into it


def verify_run(conn: sqlite3.Connection, run_id: int, knobs: VerifySettings, *, workers: int = 1,
               seams: VerifySteps = VerifySteps(),
               progress: Callable[[str], None] | None = None) -> dict[tuple[str, str], RunVerdict]:
    """Verify, shrink and isolate the reproducers of `run_id`'s tracking groups; {(config, signature): stored}.

    knobs: `[verify]` (enabled False: components by construction only; max_minutes: the step's budget, a group
    not started by then is pending, with no verdict, and a later run finishes it). Reproducers run under the run's
    own interpreter (from its environment). workers: groups run side by side. seams: how a script is run (default:
    rendered from the stored build and run in a fresh interpreter; bot.verify.steps) and the step's clock.
    progress: stage lines, and the step's progress bar on stderr (None: silent).
    """
    enabled, bar = knobs.enabled, progress is not None
    items = run_view.load_items(conn, run_id)
    groups = tracking_groups(list(items.effects), list(items.outcomes))
    every = {**groups, **_filed_wrong_results(items)}    # crashes first: a wrong result's group needs no isolation
    meter = Meter(seams.clock)
    steps = StepBar(len(every), enabled=bar and enabled, say=progress)
    ctx = StepContext.of(conn, items.run, dict(items.builds), seams=seams, timeout=knobs.timeout,
                         shrink_budget=knobs.shrink_budget, workers=workers,
                         deadline=meter.started + knobs.max_minutes * 60, meter=meter,
                         progress=steps.doing if bar and enabled else progress)
    try:
        found = reproducers.verify_all(ctx, every, items.outcomes, done=lambda group: steps.finished()) \
            if enabled else {}
        components = isolate.isolate_all(ctx, groups, found)
        if enabled:
            ablation.ablate_all(ctx, groups, found, components)
    finally:
        steps.close()
    pending = {group for group in every if enabled and group not in found}
    verdicts.record_run(conn, run_id, [RunVerdict(config, signature, found.get((config, signature)),
                                                  components.get((config, signature)), (config, signature) in pending)
                                       for config, signature in every])
    if meter.total or pending or verdicts.step_cost(conn, run_id) is None:   # a step that ran nothing writes nothing
        verdicts.record_step(conn, run_id, StepCost(round(meter.clock() - meter.started, 1), meter.total, workers,
                                                    len(every), len(pending)))
    if pending and progress:
        progress(f"{len(pending)} signature(s) past the verify budget ({knobs.max_minutes:g} min): pending, finished later")
    return verdicts.for_run(conn, run_id)


def _filed_wrong_results(items: run_view.RunItems) -> reproducers.Groups:
    """The run's wrong-result groups that may be filed: none of a flag unsafe by its own documentation."""
    table = unsafe.load()
    return {group: effects for group, effects in wrong_result_groups(list(items.effects), list(items.outcomes)).items()
            if unsafe.reason(items.run.configs.get(group[0], {}), table) is None}


def note_old_cache(state_path: str | Path) -> None:
    """Say in one line that a reproducer cache an older flagsweep left beside the store is ignored (never deleted)."""
    old = Path(state_path).with_name(OLD_CACHE)
    if old.exists():
        log.warning("%s is ignored: reproducer verdicts are kept in the store now (%s); the file can be deleted",
                    old, Path(state_path).name)
