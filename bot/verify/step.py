"""The verify step of the pipeline: verify → shrink → isolate → the maintainer's script, and store the verdicts.

Runs after flake confirmation and the range search, before the run view is loaded
for publishing: publishing only reads what this step stored (state/verdicts.py).
Each tracking group (harness.core.tracking) gets the verdict of its smallest
affected model's reproducer (bot/verify/reproducers.py: reused when stored for the
same key, else run, and shrunk when confirmed) and the component of its crash
(bot/verify/isolate.py); a confirmed verdict then gets the maintainer's script and its dynamic ablation
(bot/verify/ablation.py), once. With verification off, the run's groups get no verdict
("not run for this publish") and only components known by construction.
"""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Callable

from bot.verify import ablation, isolate, reproducers
from bot.verify.reproducers import Runner
from bot.view import run_view
from harness.core.tracking import tracking_groups
from state import verdicts
from state.verdicts import RunVerdict

log = logging.getLogger(__name__)
OLD_CACHE = "repro-cache.json"   # where verdicts were kept beside the store before they moved into it


def verify_run(conn: sqlite3.Connection, run_id: int, *, enabled: bool, timeout: float, shrink_budget: float,
               python: str | None = None, runner: Runner | None = None,
               progress: Callable[[str], None] | None = None) -> dict[tuple[str, str], RunVerdict]:
    """Verify, shrink and isolate the reproducers of `run_id`'s tracking groups; {(config, signature): stored}.

    enabled: run reproducers at all (False: components by construction only). python: the interpreter
    to run them under (default: the run's own, from its environment). runner: runs one reproducer
    (default: render it from the stored build and run it in a fresh interpreter).
    """
    items = run_view.load_items(conn, run_id)
    groups = tracking_groups(list(items.effects), list(items.outcomes))
    builds = dict(items.builds)
    found = reproducers.verify_all(conn, groups, items.outcomes, items.run, builds, python=python, timeout=timeout,
                                   runner=runner, shrink_budget=shrink_budget, progress=progress) if enabled else {}
    components = isolate.isolate_all(conn, groups, found, items.run, builds, python=python, timeout=timeout,
                                     runner=runner, progress=progress)
    if enabled:
        ablation.ablate_all(conn, groups, found, items.run, builds, components, python=python, timeout=timeout,
                            progress=progress)
    verdicts.record_run(conn, run_id, [RunVerdict(config, signature, found.get((config, signature)),
                                                  components.get((config, signature))) for config, signature in groups])
    return verdicts.for_run(conn, run_id)


def note_old_cache(state_path: str | Path) -> None:
    """Say in one line that a reproducer cache an older flagsweep left beside the store is ignored (never deleted)."""
    old = Path(state_path).with_name(OLD_CACHE)
    if old.exists():
        log.warning("%s is ignored: reproducer verdicts are kept in the store now (%s); the file can be deleted",
                    old, Path(state_path).name)
