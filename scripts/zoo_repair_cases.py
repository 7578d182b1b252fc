"""Record the real error text each input repair handles, as test data (tests/fixtures/zoo_repair_cases.json).

For every repair named in the lock, discovery runs again for the first locked
class that needed it, recording evidence; each (repair, error text, spec
before, spec after) lands in the fixture, which tests/test_zoo_repairs.py feeds
back to the repair alone. Regenerate after changing a repair:

    nice .venv/bin/python scripts/zoo_repair_cases.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.discovery.discover import discover  # noqa: E402
from harness.zoo import lock  # noqa: E402
from harness.zoo.build import quiet_transformers  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "zoo_repair_cases.json"


def main() -> int:
    quiet_transformers()
    current = lock.current()
    first_user: dict[str, str] = {}
    for model in current.names():
        for name in current.entries[model]["applied"]["repairs"]:
            first_user.setdefault(name, model)
    cases: dict[str, dict] = {}
    for name, model in sorted(first_user.items()):
        if f"_{name}" in cases:
            continue
        evidence: list[dict] = []
        try:
            discover(model, evidence)
        except Exception as exc:  # still record what was repaired before it failed
            print(f"{model}: {type(exc).__name__}", file=sys.stderr)
        for ev in evidence:
            cases.setdefault(ev["repair"], {"model": model, **ev})
        print(f"{name}: {model} -> {len(evidence)} repair(s)", file=sys.stderr)
    FIXTURE.write_text(json.dumps({"source": "discovery of locked transformers classes (Apache-2.0 error texts)",
                                   "transformers": current.version, "cases": cases}, indent=1, sort_keys=True) + "\n")
    print(f"{len(cases)} repair cases -> {FIXTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
