#!/usr/bin/env bash
# The transformers bump as one routine: install the release into the bot's venv (pinned in constraints.txt),
# re-lock the corpus for it, print what the bump changed, and check the changed classes. A maintainer then
# reviews one lock change (harness/zoo/lock/transformers-VERSION.json) and constraints.txt, and commits both.
#   scripts/bump_transformers.sh VERSION     (or: make bump-transformers VERSION=x.y.z)
#   WORKERS  worker processes for the lock and the check (default: the settings' [sweep] workers)
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:-}"
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+([a-z0-9.]*)$ ]]; then
  echo "bump: give the transformers version to move to, e.g. VERSION=5.24.0 (got '${VERSION}')" >&2
  exit 2
fi
PY=.venv/bin/python
FS=.venv/bin/flagsweep
workers=(); [ -n "${WORKERS:-}" ] && workers=(--workers "$WORKERS")
OLD="$("$PY" -c 'from importlib.metadata import version; print(version("transformers"))')"
echo "bump: transformers $OLD -> $VERSION" >&2
# torch stays as it is: only transformers (and what it needs) moves.
"$PY" -m pip install -q --disable-pip-version-check "transformers==$VERSION" "torch==$("$PY" -c 'import importlib.metadata as m; print(m.version("torch").split("+")[0])')"
sed -i "s/^transformers==.*/transformers==$VERSION/" constraints.txt
echo "bump: pinned transformers==$VERSION in constraints.txt" >&2
# The whole candidate list; an interrupted lock resumes where it stopped (run this again).
"$FS" zoo lock "${workers[@]}" || [ $? -eq 1 ]      # 1: a good entry of the old lock failed here (listed above)
"$FS" zoo diff "$OLD" "$VERSION"
changed="$("$FS" zoo diff "$OLD" "$VERSION" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(",".join(sorted(set(d["added"]) | {c["model"] for c in d["entries_changed"]} | set(d["modeling_changed"]))))')"
if [ -n "$changed" ]; then
  "$FS" zoo check "${workers[@]}" --models "$changed" || true   # failures are listed by cause: review them
else
  echo "bump: no class changed; nothing to check" >&2
fi
echo "bump: review and commit harness/zoo/lock/transformers-$VERSION.json and constraints.txt" >&2
