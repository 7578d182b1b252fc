"""Report (not a test): coverage of the zoo lock per stratum, failures by cause, and the size of the recipe data.

Reads only the lock (no torch, no builds):

    .venv/bin/python bench/zoo_lock_report.py
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.discovery import check  # noqa: E402
from harness.zoo import lock
from harness.discovery.recipes import RECIPES_PATH, load_recipes  # noqa: E402


def main() -> int:
    current = lock.current()
    entries = [current.entry(m) for m in current.names()]
    doc = check.summarize(check.result_of_entry(e) for e in entries)
    print(f"lock {current.path.name}: {doc['candidates']} classes, {doc['ok']} ok "
          f"({100.0 * doc['ok'] / max(1, doc['candidates']):.1f}%), {len(current.excluded)} excluded")
    for s, e in doc["by_stratum"].items():
        if e["candidates"]:
            print(f"  {s:16s} {e['ok']:4d}/{e['candidates']:4d}  {100.0 * e['ok'] / e['candidates']:5.1f}%")
    print(f"text-only: {len(doc['text_only'])} {doc['text_only'][:10]}")
    print("failures by status:", dict(Counter(f["status"] for f in doc["failures"])))
    for cause, models in check.group_failures(doc["failures"]):
        print(f"  {len(models):3d} x {cause[:110]}  [{', '.join(models[:4])}{', ...' if len(models) > 4 else ''}]")
    recipes = load_recipes()
    text = RECIPES_PATH.read_text()
    code_lines = [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    print(f"recipe data: {len(recipes)} sections, {len(code_lines)} non-comment lines, {len(text)} bytes "
          f"({RECIPES_PATH.name}); classes using a recipe: {sum(bool(e['applied']['recipes']) for e in entries)}")
    applied = Counter(r for e in entries for r in e["applied"]["repairs"])
    fixups = Counter(r for e in entries for r in e["applied"]["fixups"])
    print(f"repairs applied: {sum(applied.values())} over {sum(bool(e['applied']['repairs']) for e in entries)} classes; "
          f"fix-ups: {sum(fixups.values())} over {sum(bool(e['applied']['fixups']) for e in entries)} classes")
    print(f"lock file: {current.path.stat().st_size / 2**20:.1f} MiB, {len(current.path.read_text().splitlines())} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
