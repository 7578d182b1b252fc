"""The dry-run publisher, the real one's twin: records the same actions and renders them to files.

One Markdown file per action (`001-create-t1a2b….md`) plus `plan.json` in the
out dir; nothing leaves the machine. Appending to a folder (the service's replies), each publisher writes its own
`plan-<first number>.json`, takes its numbers from the `numbers` it is given (the store's counter) and never
overwrites a file. The tracking issues the planner held back
(pending over the filing budget, or watching for evidence) are written as they
would be filed under `pending/` (`watching-t1a2b….md`), so their bodies can be read. Numbers of issues it "creates" are
placeholders (900000 + n), so later actions in the same plan can refer to them.
Given `reads` (a real publisher: shadow mode), it asks GitHub everything it reads
and still writes nothing there.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bot.github.port import IssueRef, Publisher
from harness.core.files import write_atomic

PLACEHOLDER_BASE = 900000
_OURS = re.compile(r"^\d{3,}-[a-z]+-.*\.md$")
_PLAN = re.compile(r"^plan(-\d{3,})?\.json$")


@dataclass
class Recorded:
    seq: int
    action: str
    number: int | None
    key: str | None = None
    title: str | None = None
    labels: list[str] | None = None
    file: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class DryRunPublisher:
    """Records what would be written; `finish()` writes plan.json."""

    dry_run = True

    def __init__(self, out_dir: str | Path | None = None, *, permissions: dict[str, str] | None = None,
                 clean: bool = True, reads: Publisher | None = None,
                 numbers: Callable[[int], int] | None = None) -> None:
        """`clean`: remove an earlier dry run's files first (a publish); False appends (a service's replies).

        `reads`: the real publisher whose reads this one passes on (shadow mode); None: GitHub is unknown.
        `numbers`: where the file numbers come from when several publishers append to one folder at once (the
        service's job lanes: a counter in the store), called with the highest number on disk; None: counted here.
        """
        self.out_dir = Path(out_dir) if out_dir else None
        self.reads = reads
        self.shadow = reads is not None
        self.clean = clean
        self.records: list[Recorded] = []
        self.permissions = permissions or {}
        self._keys: dict[int, str] = {}
        self._offset = 0
        self._numbers = numbers
        if self.out_dir:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            for old in self.out_dir.iterdir():          # only files an earlier dry run wrote
                if _OURS.match(old.name) or _PLAN.match(old.name):
                    if clean:
                        old.unlink()
                    elif _OURS.match(old.name):
                        self._offset = max(self._offset, int(old.name.split("-", 1)[0]))

    def _next(self) -> int:
        """The next file number: from `numbers`, else one past this publisher's last."""
        if self._numbers is not None:
            self._offset = self._numbers(self._offset)
            return self._offset
        self._offset += 1
        return self._offset

    def _record(self, action: str, number: int | None, *, key: str | None = None, title: str | None = None,
                body: str | None = None, labels: list[str] | None = None, **extra: Any) -> Recorded:
        key = key or self._keys.get(number or -1)
        rec = Recorded(self._next(), action, number, key, title, labels, extra=extra)
        if self.out_dir is not None:
            content = f"# {title}\n\n{body or ''}" if title and action == "create" else (body or "")
            if not content:
                content = f"{action} #{number}" + (f": {', '.join(labels)}" if labels else "") + "\n"
            rec.file = self._write_new(rec, content)
        self.records.append(rec)
        return rec

    def _write_new(self, rec: Recorded, content: str) -> str:
        """Write an action's file under a name no earlier file has (nothing is overwritten); returns the name."""
        while True:
            name = f"{rec.seq:03d}-{rec.action}-{rec.key or rec.number}.md"
            try:   # "x": a name taken by another writer (another store's counter) moves on to the next number
                with open(self.out_dir / name, "x", encoding="utf-8") as f:
                    f.write(content)
                return name
            except FileExistsError:
                rec.seq = self._next()

    def create_issue(self, key: str, title: str, body: str, labels: list[str], *, look: bool = True) -> int:
        """Record a new issue; returns a placeholder number."""
        number = PLACEHOLDER_BASE + sum(1 for r in self.records if r.action == "create") + 1
        self._keys[number] = key
        self._record("create", number, key=key, title=title, body=body, labels=labels)
        return number

    def edit_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> bool:
        """Record a body/title rewrite."""
        self._record("edit", number, title=title, body=body)
        return True

    def comment(self, number: int, body: str, *, look: bool = False) -> int | None:
        """Record a comment."""
        self._record("comment", number, body=body)
        return None

    def close(self, number: int, reason: str = "completed") -> bool:
        """Record a close."""
        self._record("close", number, reason=reason)
        return True

    def reopen(self, number: int) -> bool:
        """Record a reopen."""
        self._record("reopen", number)
        return True

    def set_labels(self, number: int, labels: list[str]) -> bool:
        """Record a label change."""
        self._record("labels", number, labels=labels)
        return True

    def react(self, comment_id: int, content: str) -> None:
        """Record a reaction."""
        self._record("react", None, comment_id=comment_id, content=content)

    def write_held(self, held: list[tuple[str, str, str, str]]) -> None:
        """Write each held issue, (status, key, title, body), to `pending/<status>-<key>.md` (replacing the last)."""
        if self.out_dir is None:
            return
        folder = self.out_dir / "pending"
        for old in folder.glob("*.md"):
            old.unlink()
        if held:
            folder.mkdir(exist_ok=True)
        for status, key, title, body in held:
            (folder / f"{status}-{key}.md").write_text(f"# {title}\n\n{body}")

    def find_by_marker(self, key: str) -> IssueRef | None:
        """Dry runs know nothing of GitHub; a shadow asks it."""
        return self.reads.find_by_marker(key) if self.reads else None

    def user_permission(self, login: str) -> str:
        """From the `permissions` map given at construction (else `none`); a shadow asks GitHub."""
        return self.reads.user_permission(login) if self.reads else self.permissions.get(login, "none")

    def list_own_issues(self) -> list[IssueRef]:
        """Dry runs know nothing of GitHub; a shadow asks it."""
        return self.reads.list_own_issues() if self.reads else []

    def paused(self, label: str) -> IssueRef | None:
        """Dry runs know nothing of GitHub (never paused); a shadow asks it."""
        return self.reads.paused(label) if self.reads else None

    def finish(self, extra: dict[str, Any] | None = None) -> Path | None:
        """Write the plan: `plan.json` in a folder this publisher cleaned; appending, `plan-<first number>.json` for
        its own actions (none when it recorded nothing), so no job's plan replaces another's. Returns its path."""
        if self.out_dir is None or (not self.clean and not self.records):
            return None
        data = {"actions": [r.__dict__ for r in self.records], "shadow": self.shadow, **(extra or {})}
        name = "plan.json" if self.clean else f"plan-{self.records[0].seq:03d}.json"
        return write_atomic(self.out_dir / name, json.dumps(data, indent=2, sort_keys=True) + "\n")
