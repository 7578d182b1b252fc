"""The issue plans of representative stores, dumped to JSON: proof that a change to the planner changes no byte.

    .venv/bin/python -m bench.plan_snapshot OUT.json [--stores DIR]
    .venv/bin/python -m bench.plan_snapshot --replay DIR

Each scenario is a story of nightlies in a real SQLite store, published for real through PyGithub to the fake
GitHub over HTTP (the same five steps a nightly takes): first runs with crashes, a fix and a new crash,
quiet nightlies and a verified close, a reopen, a human close and its regression, regression and fix ranges,
stored reproducer verdicts (a shrink, a component with its stages, an unconfirmed one), routing cc and labels,
a command's cc and a mute, a store lost and rebuilt from GitHub, links whose body hash was cleared, shards
with models left untested, graph-break ids, an unavailable config and a sampled population. For every publish
it records the outbox entries the plan made (action, key and payload: title, body, labels, the body hash
stored with the link) and the links after it; at the end the fake GitHub's issues and comments, and the files
and plan.json of a dry run of the last nightly. Run it before a change and after, and compare the two files.

`--stores DIR` also keeps each scenario's store; `--replay DIR` publishes in a dry run, on each kept store, its
last nightly again and a next nightly identical to it, prints the actions planned and exits 1 on any edit or
labels: a store written by an earlier version must not make the current one rewrite unchanged issues (a quiet
night's comment or a verified close may still be due; compare the output with the earlier version's).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import sqlite3
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from bot.github import publish
from bot.settings import GitHubSettings, IssueSettings, Settings, VerifySettings
from harness.core.model_build import ModelBuild
from harness.core.options import RunOptions
from harness.core.outcome import STRATA, Outcome
from harness.core.run_environment import RunEnvironment
from state import db, history, links, outbox, ranges, runs, verdicts
from state.verdicts import Component, RunVerdict, Shrink, Stage, Verdict
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc

CSO, CDO, M = sc.CSO, sc.CDO, sc.M
nightly3, quiet_c = sc.nightly3, sc.quiet_c
FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "graph_breaks.json").read_text())


# -- stores ----------------------------------------------------------------------------------------------------
def record(conn: sqlite3.Connection, date: str, results: dict[str, dict[str, Any]], *, shard: str | None = None,
           override: dict[tuple[str, str], Outcome] | None = None, unavailable: dict | None = None,
           options: dict | None = None, kind: str = "nightly", env: dict | None = None) -> int:
    """One stored, finalized nightly of hand-made results (sc.outcome), with some items replaced."""
    models = sorted(results)
    configs = {n: s for n, s in sc.CONFIGS.items() if n not in (unavailable or {})}
    run_id = runs.create_run(conn, environment=RunEnvironment.from_dict(env or sc.ENV), models=models, configs=configs,
                             kind=kind,
                             nightly=date if kind == "nightly" else None, shard=shard, unavailable=unavailable,
                             options=RunOptions.from_dict({"backend": "count", "device": "cpu", **(options or {})}))
    for i, model in enumerate(models):
        stratum = STRATA[i % len(STRATA)]
        base = results[model].get("baseline", 3)
        for config in configs:
            o = (override or {}).get((model, config)) or sc.outcome(model, config, results[model].get(config, base),
                                                                     stratum)
            runs.record_outcome(conn, run_id, o)
    runs.finish_run(conn, run_id)
    history.finalize_run(conn, run_id)
    return run_id




def settings_for(fake: FakeGitHub, state: Path, **issues: Any) -> Settings:
    # min_models=1: the stories' one-model signatures filed at once, as before the evidence rule
    return Settings(state_path=state, github=fake.settings(retry_backoff=0.0),
                    issues=IssueSettings(**{"verify_nightlies": 2, "min_models": 1, **issues}),
                    verify=VerifySettings(enabled=False))


class Story:
    """One scenario: a store, a fake GitHub, and what each publish planned."""

    def __init__(self, name: str, tmp: Path, **issues: Any) -> None:
        self.name, self.tmp = name, tmp / name
        self.tmp.mkdir(parents=True)
        self.fake = FakeGitHub.start()
        self.settings = settings_for(self.fake, self.tmp / "state.sqlite", **issues)
        self.conn = db.connect(self.settings.state_path)
        self.publishes: list[dict[str, Any]] = []
        self.last_run: int | None = None

    def publish(self, run_id: int, label: str) -> None:
        seen = {e.id for e in outbox.entries(self.conn)}
        summary = publish.publish_run(self.conn, self.settings, run_id, dry_run=False, out_dir=None,
                                      publisher=publish.open_publisher(self.settings, dry_run=False, out_dir=None))
        planned = [{"action": e.action, "key": e.key, "payload": dataclasses.asdict(e.payload), "status": e.status}
                   for e in outbox.entries(self.conn) if e.id not in seen]
        self.publishes.append({"label": label, "run": run_id, "actions": summary.actions, "done": summary.done,
                               "written": summary.written, "pending": summary.pending, "synced": summary.synced,
                               "planned": planned, "links": link_rows(self.conn)})
        self.last_run = run_id

    def finish(self, stores: Path | None) -> dict[str, Any]:
        result = {"publishes": self.publishes, "github": self.fake.state.snapshot(self.fake.repo),
                  "dry_run": self.dry_run("dry")}
        if stores is not None:
            stores.mkdir(parents=True, exist_ok=True)
            kept = sqlite3.connect(stores / f"{self.name}.sqlite")
            self.conn.backup(kept)                           # WAL: a file copy could miss the newest pages
            kept.close()
        self.conn.execute("DELETE FROM issue_links")        # every active issue planned afresh: all bodies
        result["dry_run_unlinked"] = self.dry_run("unlinked")
        self.conn.close()
        self.fake.stop()
        return result

    def dry_run(self, name: str) -> dict[str, str]:
        """A dry run of the last nightly: its files and plan.json."""
        out = self.tmp / name
        publish.publish_run(self.conn, self.settings, self.last_run, dry_run=True, out_dir=str(out),
                            publisher=publish.open_publisher(self.settings, dry_run=True, out_dir=str(out)))
        return {p.name: p.read_text() for p in sorted(out.iterdir())}


def link_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [{k: v for k, v in link.to_dict().items() if k != "updated_at"} for link in links.all_links(conn).values()]


# -- scenarios ---------------------------------------------------------------------------------------------------
def story(s: Story) -> None:
    """File, a quiet nightly, a fix and a new crash, C quiet then closed, then back (reopened); cleared hashes."""
    s.settings = replace(s.settings, routing=[
        {"signature": "^PendingUnbacked", "cc": ["ezyang"], "labels": ["module: dynamic shapes"]},
        {"torch_file": "torch/fx/experimental/*", "cc": ["bob"]}])
    s.publish(record(s.conn, "2026-11-20", sc.corpus()), "n1 files")
    s.publish(record(s.conn, "2026-11-21", sc.corpus()), "n2 identical")
    s.publish(record(s.conn, "2026-11-22", nightly3()), "n3 fix and new crash")
    s.publish(record(s.conn, "2026-11-23", quiet_c(nightly3())), "n4 C quiet")
    s.publish(record(s.conn, "2026-11-24", quiet_c(nightly3())), "n5 C closed")
    s.publish(record(s.conn, "2026-11-25", quiet_c(nightly3())), "n6 closed and quiet")
    s.publish(record(s.conn, "2026-11-26", nightly3()), "n7 C back")
    s.conn.execute("UPDATE issue_links SET body_sha = NULL")
    s.publish(record(s.conn, "2026-11-27", nightly3()), "n8 hashes cleared")
    s.settings = replace(s.settings, routing=[])
    s.publish(record(s.conn, "2026-11-28", nightly3()), "n9 routing gone")


def human(s: Story) -> None:
    """A human edits one issue and closes another; B goes away, then regresses."""
    s.publish(record(s.conn, "2026-11-20", sc.corpus()), "n1 files")
    issues = {i.title: i for i in s.fake.state.issues(s.fake.repo)}
    a = issues["capture_scalar_outputs=True crashes 2/10 models with PendingUnbackedSymbolNotFound"]
    b = issues["capture_scalar_outputs=True crashes 1/10 models with GuardOnDataDependentSymNode"]
    a.body = "Triage note.\n\n" + a.body + "\nMore notes."
    s.fake.state.close_issue(s.fake.repo, b.number, user=s.fake.human, reason="not_planned")
    s.publish(record(s.conn, "2026-11-21", nightly3()), "n2 after human close")
    later = copy.deepcopy(nightly3())
    later[M[2]][CSO] = 3
    later[M[5]][CSO] = 3
    s.publish(record(s.conn, "2026-11-22", later), "n3 B gone")
    s.publish(record(s.conn, "2026-11-23", nightly3()), "n4 B regressed")
    # A bot-closed issue (C) through a close and a reopen, and a summary a person closed.
    summ = next(i for i in s.fake.state.issues(s.fake.repo) if i.title.startswith("flagsweep summary: capture_dyn"))
    s.fake.state.close_issue(s.fake.repo, summ.number, user=s.fake.human)
    s.publish(record(s.conn, "2026-11-24", quiet_c(nightly3())), "n5 C quiet, summary closed")


def _shrink_stats() -> dict[str, Any]:
    return {"tries": 7, "kept": 3, "seconds": 42.5, "stopped": "done",
            "before": {"parameters": 1234567, "data_lines": 80, "lines": 120, "input_elements": 4096, "seconds": 12.0},
            "after": {"parameters": 2345, "data_lines": 20, "lines": 60, "input_elements": 16, "seconds": 3.1},
            "rows": [["num_hidden_layers", 4, 1], ["hidden_size", 64, 16], ["input_ids shape", [2, 8], [1, 2]]],
            "defaulted": 2, "dropped": ["attention_mask"]}


def _verdicts(conn: sqlite3.Connection, run_id: int, *, shrink: bool) -> None:
    build = dict(fingerprint="fp", build_version=sc.ENV["torch_version"], build_git=sc.ENV["torch_git"])
    comp = Component("inductor", "inductor", False,
                     (Stage("eager", "passes", 1.2), Stage("aot_eager", "passes", 2.5),
                      Stage("inductor", "fails", 3.4, sc.SIG_A)), CSO, sc.SIG_A, M[1], "2.13.0", "abc")
    a = Verdict(CSO, sc.SIG_A, M[1], status="confirmed", script="import torch\nprint('repro A')\n",
                torch_version=sc.ENV["torch_version"], torch_git=sc.ENV["torch_git"], shrunk=shrink,
                shrink=Shrink(ModelBuild(M[1], "LlamaConfig", {"num_hidden_layers": 1}, {}, 0), _shrink_stats()) if shrink else None,
                component=comp, **build)
    b = Verdict(CSO, sc.SIG_B, M[2], status="unconfirmed", reason="ran without crashing in a fresh interpreter",
                **build)
    for v in (a, b):
        verdicts.put(conn, v)
    undetermined = Component("undetermined", "inductor", False, (Stage("eager", "no_result", 0.1, None, "no python"),))
    verdicts.record_run(conn, run_id, [RunVerdict(CSO, sc.SIG_A, a, comp), RunVerdict(CSO, sc.SIG_B, b, undetermined),
                                       RunVerdict(CDO, sc.SIG_C, None, Component("dynamo", "count", True))])


def _range(run_id: int, config: str, sig: str, kind: str, status: str, reason: str | None = None) -> ranges.Range:
    return ranges.Range(run_id=run_id, config=config, signature=sig, kind=kind, status=status,
                        good=ranges.Build("2026-11-03", "2.14.0.dev20261103+cpu", "a" * 40),
                        bad=ranges.Build("2026-11-04", "2.14.0.dev20261104+cpu", "b" * 40), models=[M[5]],
                        installs=3, reason=reason)


def verified(s: Story) -> None:
    """Stored verdicts (shrunk, unconfirmed, by construction), ranges, a command's cc, a mute, a fix range."""
    r1 = record(s.conn, "2026-11-20", sc.corpus())
    _verdicts(s.conn, r1, shrink=False)
    s.publish(r1, "n1 verdicts")
    r2 = record(s.conn, "2026-11-21", sc.corpus())
    _verdicts(s.conn, r2, shrink=True)
    s.publish(r2, "n2 shrunk")
    r3 = record(s.conn, "2026-11-22", nightly3())
    _verdicts(s.conn, r3, shrink=True)
    ranges.record(s.conn, _range(r3, CSO, sc.SIG_B, "new_crash", "found"))
    s.publish(r3, "n3 new crash with a range")
    r4 = record(s.conn, "2026-11-23", nightly3())
    _verdicts(s.conn, r4, shrink=True)
    ranges.record(s.conn, _range(r4, CSO, sc.SIG_B, "new_crash", "bounded", "stopped after 8 installs"))
    key_a = next(k for k, l in links.all_links(s.conn).items() if l.signature == sc.SIG_A)
    links.update(s.conn, key_a, cc=["@alice", "@ezyang", "not a handle!"])
    s.publish(r4, "n4 bounded range, command cc")
    key_b = next(k for k, l in links.all_links(s.conn).items() if l.signature == sc.SIG_B)
    links.update(s.conn, key_b, muted=True)
    r5 = record(s.conn, "2026-11-24", quiet_c(nightly3()))
    ranges.record(s.conn, _range(r5, CDO, sc.SIG_C, "fixed", "no_series", "the torch under test was not installed"))
    s.publish(r5, "n5 C quiet, B muted")
    r6 = record(s.conn, "2026-11-25", quiet_c(nightly3()))
    ranges.record(s.conn, _range(r6, CDO, sc.SIG_C, "fixed", "found"))
    s.publish(r6, "n6 C closed with a fix range")


def lost(s: Story) -> None:
    """The store is lost after the first nightly: the links are rebuilt from GitHub, bodies refreshed in place."""
    s.publish(record(s.conn, "2026-11-20", sc.corpus()), "n1 files")
    s.conn.close()
    s.settings = replace(s.settings, state_path=s.tmp / "fresh.sqlite")
    s.conn = db.connect(s.settings.state_path)
    s.publish(record(s.conn, "2026-11-21", sc.corpus()), "n2 in a fresh store")
    s.publish(record(s.conn, "2026-11-22", sc.corpus()), "n3 identical")


def shards(s: Story) -> None:
    """Untested models (left the corpus, a missing shard, a build error) never count as fixed."""
    def fixed(results: dict) -> dict:
        out = {m: dict(spec) for m, spec in results.items()}
        out[M[0]][CDO] = 3
        return out
    err = {(M[0], c): Outcome(model=M[0], config=c, status="create_error", stratum="decoder_llm") for c in sc.CONFIGS}
    s.publish(record(s.conn, "2026-11-20", sc.corpus()), "n1 files")
    s.publish(record(s.conn, "2026-11-21", {m: r for m, r in fixed(sc.corpus()).items() if m != M[0]}), "n2 M00 gone")
    s.publish(record(s.conn, "2026-11-22", {m: r for m, r in fixed(sc.corpus()).items() if m != M[0]}, shard="1/2"),
              "n3 one shard")
    s.publish(record(s.conn, "2026-11-23", fixed(sc.corpus()), override=err), "n4 create error")
    s.publish(record(s.conn, "2026-11-24", fixed(sc.corpus())), "n5 verified once")
    s.publish(record(s.conn, "2026-11-25", fixed(sc.corpus())), "n6 verified twice: closed")
    s.publish(record(s.conn, "2026-11-26", sc.corpus()), "n7 back")


def breaks(s: Story) -> None:
    """Graph-break ids removed and introduced, a crash named by its id, an unavailable config, a population."""
    item, printed = FIXTURE["break_reasons"]
    error = FIXTURE["errors"][0]

    def out(model: str, config: str, reasons: list[dict], status: str = "ok", sig: str | None = None,
            gb_id: str | None = None) -> Outcome:
        return Outcome(model=model, config=config, status=status, graphs=len(reasons) + 1, graph_breaks=len(reasons),
                       break_reasons=[r["reason"] for r in reasons], break_ids=[r["gb_id"] for r in reasons],
                       signature=sig, gb_id=gb_id, stratum="decoder_llm", error_type=sig and sig.split(":")[0],
                       error_message=sig and error["message"], fingerprint=f"fp-{model}",
                       attempts=sc.CONFIRMED_ATTEMPTS if sig else 1)
    override = {(M[0], "baseline"): out(M[0], "baseline", [item]), (M[0], CSO): out(M[0], CSO, []),
                (M[1], "baseline"): out(M[1], "baseline", [item]), (M[1], CSO): out(M[1], CSO, [printed]),
                (M[2], "baseline"): out(M[2], "baseline", [item]), (M[2], CSO): out(M[2], CSO, [item]),
                (M[3], CSO): out(M[3], CSO, [printed], "error", f"GB0059: {error['gb_type']}", "GB0059"),
                (M[4], CSO): out(M[4], CSO, [printed], "error", f"GB0059: {error['gb_type']}", "GB0059")}
    population = {"population": {"population": "graph-breaking", "source": "run 1", "sample": 10, "size": 40,
                                 "seed": 7, "candidates": 55, "strata": {"decoder_llm": [4, 20], "vision": [6, 20]}}}
    missing = {CDO: {"settings": sc.CONFIGS[CDO], "missing": ["torch._dynamo.config.capture_dynamic_output_shape_ops"]}}
    s.publish(record(s.conn, "2026-11-20", sc.corpus(), override=override, options=population), "n1 breaks")
    s.publish(record(s.conn, "2026-11-21", sc.corpus(), override=override, unavailable=missing), "n2 CDO unavailable")
    s.publish(record(s.conn, "2026-11-22", sc.corpus(), unavailable=missing), "n3 breaks gone")


def adhoc(s: Story) -> None:
    """Command sweeps of other models between nightlies are no quiet nights."""
    s.publish(record(s.conn, "2026-11-20", sc.corpus()), "n1 files")
    few = {m: r for m, r in quiet_c(sc.corpus()).items() if m in (M[6], M[7])}
    for _ in range(3):
        record(s.conn, "", few, kind="command")
    s.publish(record(s.conn, "2026-11-21", quiet_c(sc.corpus())), "n2 quiet")
    s.publish(record(s.conn, "2026-11-22", quiet_c(sc.corpus())), "n3 closed")


SCENARIOS: dict[str, Callable[..., None]] = {"story": story, "human": human, "verified": verified, "lost": lost,
                                             "shards": shards, "breaks": breaks, "adhoc": adhoc}


def snapshot(stores: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in SCENARIOS.items():
            s = Story(name, Path(tmp))
            fn(s)
            out[name] = s.finish(stores)
    return out


def replay(stores: Path) -> dict[str, dict[str, list[str]]]:
    """Per kept store, the actions two dry runs plan: the store's last nightly published again, and a next
    nightly identical to it (no edit and no labels expected: only what a quiet night earns)."""
    planned: dict[str, dict[str, list[str]]] = {}
    for path in sorted(stores.glob("*.sqlite")):
        with tempfile.TemporaryDirectory() as tmp:
            copy_path = Path(tmp) / path.name
            shutil.copy(path, copy_path)                    # kept by a backup: one file, no WAL beside it
            conn = db.connect(copy_path)
            repo = next(iter({l.repo for l in links.all_links(conn).values()}), None)
            settings = Settings(state_path=copy_path, github=GitHubSettings(repo=repo),
                                issues=IssueSettings(verify_nightlies=2, min_models=1),
                                verify=VerifySettings(enabled=False))
            last = runs.get_run(conn, max(r.id for r in history.latest_runs(conn, 1, kinds=("nightly",))))
            again = _identical(conn, last)

            def actions(run_id: int, out: str) -> list[str]:
                publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(Path(tmp) / out),
                                    publisher=publish.open_publisher(settings, dry_run=True,
                                                                     out_dir=str(Path(tmp) / out)))
                plan = json.loads((Path(tmp) / out / "plan.json").read_text())
                return [f"{a['action']} {a['key']}" for a in plan["actions"]]
            planned[path.stem] = {"same": actions(last.id, "same"), "next": actions(again, "next")}
            conn.close()
    return planned


def _identical(conn: sqlite3.Connection, last: runs.Run) -> int:
    """A nightly after `last` with its results, its ranges and its verdicts."""
    again = runs.create_run(conn, environment=last.environment, models=last.models, configs=last.configs,
                            base_settings=last.base_settings, options=last.options, kind="nightly",
                            nightly="2026-12-31", unavailable=last.unavailable)
    for o in history.group_outcomes(conn, last.id):
        runs.record_outcome(conn, again, o)
    runs.finish_run(conn, again)
    history.finalize_run(conn, again)
    verdicts.record_run(conn, again, list(verdicts.for_run(conn, last.id).values()))
    return again


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="where the JSON snapshot goes")
    ap.add_argument("--stores", type=Path, help="keep each scenario's store here")
    ap.add_argument("--replay", type=Path, help="dry-run an identical nightly on each kept store")
    args = ap.parse_args(argv)
    if args.replay:
        planned = replay(args.replay)
        print(json.dumps(planned, indent=1, sort_keys=True))
        rewrites = [a for p in planned.values() for a in p["same"] + p["next"] if a.split()[0] in ("edit", "labels")]
        return 0 if not rewrites else 1
    if not args.out:
        ap.error("give OUT.json or --replay DIR")
    data = snapshot(args.stores)
    Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    print(f"{args.out}: {sum(len(s['publishes']) for s in data.values())} publishes in {len(data)} scenarios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
