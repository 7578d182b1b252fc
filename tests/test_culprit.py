"""From the nightly to the commit, without torch: merge-bot messages, the overlay's rule, suspects, the cc rule,
the fake GitHub's compare and commits through the real client, and every bad input one clear line."""
from __future__ import annotations

import dataclasses
import sys

import pytest

from bot.builds import checkout
from bot.github.client import GitHubPublisher
from bot.ranges import culprit
from bot.settings import CulpritSettings
from harness.core.commits import (Commit, CommitError, FileChange, Person, changed_paths, commit, nightly_main_sha,
                                  overlay_blocker, parse_message)
from harness.core.suspects import Crash, cc_for, frame_files, rank
from tests import culprit_series as series

SETTINGS = CulpritSettings()
H = "@flagsweep-bot"


def c(sha: str, *paths: str, author: str = "alice", status: str = "modified", coauthors: tuple[str, ...] = ()) -> Commit:
    """A commit; each co-author a login, or a name (with a space: no login)."""
    people = tuple(Person(p) if " " in p else Person(p.title(), p) for p in coauthors)
    return Commit(sha=sha * 40 if len(sha) == 1 else sha, title=f"change {sha}", author=author,
                  files=tuple(FileChange(p, status) for p in paths), coauthors=people)


# -- what the merge bot and the nightly job write --------------------------------------------------------------
def test_a_merge_bot_message_names_the_pr_approvers_and_co_authors():
    said = parse_message(series.message("[dynamo] fix abs", 1002, ("reviewer2", "reviewer3"), coauthor="carol"))
    assert (said.title, said.pr, said.approvers, said.coauthors) == ("[dynamo] fix abs (#1002)", 1002,
                                                                     ("reviewer2", "reviewer3"), (Person("Carol", "carol"),))
    # a message with only the title's (#N), and a co-author without a noreply address (named, never a login)
    said = parse_message("Fix it (#77)\n\nCo-authored-by: Dana Smith <dana@example.com>\n")
    assert (said.pr, said.approvers, said.coauthors) == (77, (), (Person("Dana Smith"),))


def test_a_nightly_commit_names_its_main_commit_and_anything_else_is_one_line():
    assert nightly_main_sha("2026-11-27 nightly release (0123456789abcdef0123456789abcdef01234567)\n") == \
        "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(CommitError, match=r"^not a nightly release commit: its message reads 'Fix it \(#77\)'$"):
        nightly_main_sha("Fix it (#77)\n\nbody")
    with pytest.raises(CommitError, match="is not a commit sha"):
        commit("not-a-sha", "x", None, ())


def test_the_overlay_carries_python_under_torch_only_deletions_and_renames_too():
    py, test = c("a", "torch/_dynamo/utils.py", "test/dynamo/test_x.py"), c("b", "aten/src/ATen/x.cpp")
    deleted = c("d", "torch/_dynamo/old.py", status="removed")
    renamed = Commit("f" * 40, "move", "alice", (FileChange("torch/_dynamo/new.py", "renamed", "torch/_dynamo/old.py"),))
    csrc = c("e", "torch/csrc/dynamo/guards.cpp")
    assert [overlay_blocker(x) for x in (py, deleted, renamed)] == [None, None, None]
    assert changed_paths([py, renamed]) == ["torch/_dynamo/utils.py", "torch/_dynamo/old.py", "torch/_dynamo/new.py"]
    assert overlay_blocker(csrc) == "it changes torch/csrc/dynamo/guards.cpp, which is not Python in the torch package"
    assert overlay_blocker(c("g", "torch/csrc/x.h", status="removed")) == ("it deletes torch/csrc/x.h, which is not "
                                                                          "Python in the torch package")
    assert "aten/src/ATen/x.cpp" in overlay_blocker(test)


# -- suspects and the cc rule ------------------------------------------------------------------------------------
TRACEBACK = '''Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py", line 10, in __call__
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 20, in step
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/variables/builtin.py", line 30, in call_function
NotImplementedError: abs() of a traced value
'''


def test_suspects_rank_by_the_crash_frames_innermost_first_each_with_why():
    frames = frame_files(TRACEBACK)
    assert frames == ("torch/_dynamo/variables/builtin.py", "torch/_dynamo/symbolic_convert.py",
                      "torch/_dynamo/convert_frame.py")
    crash = Crash(frames=frames, flag_modules=("torch/_dynamo/config.py",), readers=("torch/_dynamo/output_graph.py",),
                  component="dynamo")
    commits = [c("1", "torch/_dynamo/convert_frame.py"), c("2", "torch/_inductor/lowering.py"),
               c("3", "torch/_dynamo/variables/builtin.py"), c("4", "torch/_dynamo/config.py"),
               c("5", "torch/_dynamo/output_graph.py")]
    ranked = rank(commits, crash)
    assert [s.commit.sha[0] for s in ranked] == ["3", "1", "4", "5"]     # the Inductor change touches nothing
    assert ranked[0].why == ("changes torch/_dynamo/variables/builtin.py, the innermost torch frame of the crash",
                             "changes torch/_dynamo/, the component the isolation found (dynamo)")
    assert ranked[1].why[0] == "changes torch/_dynamo/convert_frame.py, torch frame 3 from the innermost of the crash"
    assert ranked[2].why[0] == "changes torch/_dynamo/config.py, which defines the flag"
    assert ranked[3].why[0] == "changes torch/_dynamo/output_graph.py, which reads the flag"


@pytest.mark.parametrize("suspects, removed, expected", [
    ([c("1", "x", author="bob", coauthors=("carol", "Dana Smith"))], set(), ["bob", "carol"]),   # 1: its authors
    ([c("1", "x", author="bob"), c("2", "x", author="erin"), c("3", "x", author="bob")], set(), ["bob", "erin"]),
    ([c(str(i), "x", author=f"u{i}") for i in range(4)], set(), []),                            # >3: nobody
    ([c("1", "x", author="bob"), c("2", "x", author="erin")], {"@Erin"}, ["bob"]),              # removed: never
    ([], set(), []),
])
def test_the_cc_rule(suspects, removed, expected):
    assert cc_for(suspects, removed) == expected


# -- the fake GitHub's compare and commits, through the real client -------------------------------------------------
def _seed(fake, n: int, *, planted_at: int = 2) -> list[str]:
    shas, parent = [], None
    for i in range(n + 1):
        sha = f"{i:040x}"
        planted = i == planted_at
        msg = series.message(f"change {i}", 2000 + i, ("reviewer2", "reviewer3") if planted else ("reviewer1",),
                             coauthor="carol" if planted else None)
        files = [{"filename": "torch/_dynamo/variables/builtin.py" if planted else f"torch/_dynamo/f{i}.py",
                  "status": "modified"}]
        fake.state.add_commit("pytorch/pytorch", sha, msg, author="bob" if planted else "alice", files=files,
                              parent=parent)
        shas.append(sha)
        parent = sha
    return shas


def test_compare_pages_and_each_commit_says_its_pr_people_and_files(fake_github):
    fake_github.state.add_repo("pytorch/pytorch")
    shas = _seed(fake_github, 101)
    client = GitHubPublisher(fake_github.settings())
    found = client.commit_range("pytorch/pytorch", shas[0], shas[-1], most=500)
    assert [x.sha for x in found] == shas[1:]
    planted = found[1]
    assert (planted.pr, planted.author, planted.coauthors, planted.approvers, planted.parent) == (
        2002, "bob", (Person("Carol", "carol"),), ("reviewer2", "reviewer3"), shas[1])
    assert planted.files == (FileChange("torch/_dynamo/variables/builtin.py", "modified"),)
    assert len(fake_github.requests.matching("GET", r"/compare/")) == 2        # 101 commits: two pages of 100
    assert len(fake_github.requests.matching("GET", r"/commits/[0-9a-f]+$")) == 101


def test_a_range_of_five_thousand_commits_is_refused_in_one_line_before_any_commit_is_read(fake_github):
    fake_github.state.add_repo("pytorch/pytorch")
    shas = _seed(fake_github, 5000)
    client = GitHubPublisher(fake_github.settings())
    steps = culprit.CulpritSteps(commits=lambda good, bad: client.commit_range("pytorch/pytorch", good, bad, 500))
    found = culprit.find(steps, culprit.Search("S", shas[0], shas[-1]), SETTINGS)
    assert (found.status, found.reason) == ("failed", f"5000 commits between {shas[0][:12]} and {shas[-1][:12]}: more "
                                                      "than [culprit] max_commits = 500, not searched")
    assert not fake_github.requests.matching("GET", r"/commits/[0-9a-f]+$")


# -- bad input from a checkout: one line each, nothing raised --------------------------------------------------------
def test_a_checkout_lacking_the_commit_and_an_empty_range_are_one_line_each(tmp_path):
    s = series.build(tmp_path / "repo", ["harmless1"])
    steps = culprit.CulpritSteps(commits=lambda good, bad: checkout.commits(s.repo, good, bad))
    lacking = culprit.find(steps, culprit.Search("S", s.good, "f" * 40), SETTINGS)
    assert (lacking.status, lacking.reason) == ("failed", "the checkout lacks commit ffffffffffff (fetch it, or the "
                                                          "checkout is behind)")
    empty = culprit.find(steps, culprit.Search("S", s.good, s.good), SETTINGS)
    assert (empty.status, empty.reason) == ("failed", f"no commits between {s.good[:12]} and {s.good[:12]}: "
                                                      "nothing to search")
    # the nightly commit's message names the good build's main commit; the main commit's own does not
    assert nightly_main_sha(checkout.message(s.repo, s.nightly)) == s.good
    with pytest.raises(CommitError, match="not a nightly release commit"):
        nightly_main_sha(checkout.message(s.repo, s.shas["harmless1"]))
    # without an overlay to run on, the suspects are still ranked
    ranked = culprit.find(steps, culprit.Search("S", s.good, s.shas["harmless1"],
                                                Crash(frames=("torch/_dynamo/config.py",))), SETTINGS)
    assert ranked.status == "suspects" and [r.sha for r in ranked.suspects] == [s.shas["harmless1"]]
    assert ranked.reason == "no [culprit] checkout: suspects ranked, no bisection"


GONE = '''import importlib.util, json, pathlib
pkg = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0])
gone = not (pkg / "_dynamo/config.py").exists()
print("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", "signature": "S"} if gone else {"v": 1, "status": "ok"}))
'''


def test_a_commit_deleting_a_torch_file_is_carried_by_the_overlay_and_bisected(tmp_path):
    from bot.pipeline.culprit import run_step
    from bot.ranges import overlay
    build = tmp_path / "build/torch"                  # a small build: the two files the series holds, and a library
    for rel in series.SLICE:
        (build / rel[len("torch/"):]).parent.mkdir(parents=True, exist_ok=True)
        (build / rel[len("torch/"):]).write_text((series.TORCH_DIR / rel[len("torch/"):]).read_text())
    (build / "__init__.py").write_text("")
    s = series.build(tmp_path / "repo", ["harmless1", "harmless2"])
    series._git(s.repo, "rm", "-q", "torch/_dynamo/config.py")
    series._git(s.repo, "commit", "-q", "-m", series.message("[dynamo] drop config", 1005, ("reviewer1",)),
                author="frank")
    bad = series._git(s.repo, "rev-parse", "HEAD")
    steps = culprit.CulpritSteps(commits=lambda good, b: checkout.commits(s.repo, good, b),
                                 file_at=lambda sha, path: checkout.file_at(s.repo, sha, path),
                                 good=culprit.Build(build, tmp_path / "overlay",
                                                    run_step(GONE, sys.executable, 60)))
    found = culprit.find(steps, culprit.Search("S", s.shas["harmless1"], bad), SETTINGS)
    assert (found.status, found.bisection.culprit, found.bisection.parent) == ("found", bad, s.shas["harmless2"])
    overlay.make(build, tmp_path / "overlay")        # made the build's again: the deleted file is back
    assert (tmp_path / "overlay/torch/_dynamo/config.py").is_file()


# -- wrong-culprit (maintainers), cc remove, and the count beside the precision -------------------------------------
def test_wrong_culprit_is_for_maintainers_removes_the_cc_it_added_and_counts_in_stats(tmp_path, fake_github, capsys):
    from bot.cli.main import main
    from bot.issues.culprit import attribute
    from state import culprits, links
    from state.culprits import Bisection, CommitRange, SuspectRow
    from tests.test_command_replies import TRIAGER, Desk

    desk = Desk(tmp_path, fake_github)
    fake_github.state.set_role(fake_github.repo, "maya-maintainer", "maintain")
    planted = c("b", "torch/_dynamo/variables/builtin.py", author="bob", coauthors=("carol",))
    other = c("e", "torch/_dynamo/config.py", author="erin")
    culprits.record(desk.conn, CommitRange(signature="S", good_git="1" * 40, bad_git="2" * 40, status="found",
                                           commits=[other, planted],
                                           suspects=[SuspectRow(planted.sha, 110, ["why"]), SuspectRow(other.sha, 40)],
                                           bisection=Bisection(culprit=planted.sha, parent=other.sha),
                                           config="capture_scalar_outputs"))
    # the same signature under another config, stored later: another issue's culprit, never marked from this one
    culprits.record(desk.conn, CommitRange(signature="S", good_git="1" * 40, bad_git="3" * 40, status="found",
                                           commits=[other], bisection=Bisection(culprit=other.sha, parent="1" * 40),
                                           config="other_config"))
    links.upsert(desk.conn, dataclasses.replace(links.get(desk.conn, "a"), signature="S",
                                                config="capture_scalar_outputs"))
    assert attribute(culprits.get(desk.conn, "S", "1" * 40, "2" * 40, "capture_scalar_outputs"), frozenset(),
                     "pytorch/pytorch").cc == ["bob", "carol"]

    result, replies = desk.send(f"{H} wrong-culprit", TRIAGER)
    assert result["commands"][0]["outcome"] == "refused" and "needs maintain permission" in replies[0]
    result, replies = desk.send(f"{H} wrong-culprit\n{H} cc remove @erin", "maya-maintainer")
    assert [x["outcome"] for x in result["commands"]] == [f"wrong culprit {planted.sha[:12]}", "cc remove"]
    assert f"Recorded: `{planted.sha[:12]}` is not the culprit" in replies[0]
    assert culprits.removed(desk.conn) == {"a": frozenset({"bob", "carol", "erin"})}
    marked = culprits.get(desk.conn, "S", "1" * 40, "2" * 40, "capture_scalar_outputs")
    assert marked.wrong_by == "maya-maintainer"
    assert culprits.get(desk.conn, "S", "1" * 40, "3" * 40, "other_config").wrong_by is None
    # the issue says so and cc's nobody for it (a culprit marked wrong is not replaced by a guess)
    said = attribute(marked, culprits.removed(desk.conn)["a"], "pytorch/pytorch")
    assert said.cc == [] and said.section["wrong"] == {"sha": planted.short, "by": "maya-maintainer"}
    _, replies = desk.send(f"{H} wrong-culprit", "maya-maintainer")
    assert "names no bisected culprit" in replies[0]
    desk.conn.close()
    assert main(["--state", str(tmp_path / "state.sqlite"), "stats", "--json"]) == 0
    import json
    assert json.loads(capsys.readouterr().out)["culprits"] == {"named": 2, "wrong": 1}
    assert main(["--state", str(tmp_path / "state.sqlite"), "stats"]) == 0
    assert "culprits bisected: 2, marked wrong by a maintainer: 1 (50.0% not marked wrong)" in capsys.readouterr().out


def test_a_commit_range_is_kept_per_mode_so_one_bisected_in_train_is_never_evals(tmp_path):
    """Issue 46: a range bisected with train's reproducer is train's. Eval's search over the same builds finds none
    stored and searches for itself (here it fails in one line: the checkout lacks the builds' commits); the tracking
    issue of each mode shows its own, and a wrong-culprit marks only its own mode's."""
    from bot.pipeline import culprit as step
    from bot.settings import Settings
    from bot.view.run_view import commit_ranges
    from harness.core.modes import BUILTIN
    from state import culprits, db, runs
    from state.culprits import Bisection, CommitRange
    from state.ranges import Build, Range
    from tests import historydata as hd
    conn = db.connect(tmp_path / "state.sqlite")
    train, good, bad = BUILTIN["train"].key, "1" * 40, "2" * 40
    planted = c("b", "torch/_dynamo/x.py", author="bob")
    culprits.record(conn, CommitRange("S", good, bad, "found", commits=[planted], config="a", mode=train,
                                      bisection=Bisection(culprit=planted.sha, parent=good)))
    run = runs.get_run(conn, hd.store_run(conn, [hd.crash("GPT2Model", "a", sig="S")], kind="nightly",
                                          nightly="2026-11-28"))
    r = Range(run_id=run.id, config="a", signature="S", kind="new_crash", status="found",
              good=Build("2026-11-27", "2.14.0.dev20261127+cpu", good),
              bad=Build("2026-11-28", "2.14.0.dev20261128+cpu", bad), models=["GPT2Model"])
    repo = series.build(tmp_path / "repo", ["harmless1"]).repo
    found = step.for_range(conn, run, r, Settings(state_path=tmp_path / "state.sqlite"), step.Checkout(repo), None)
    assert (found.status, found.mode) == ("failed", "") and "the checkout lacks commit 111111111111" in found.reason
    assert culprits.get(conn, "S", good, bad, "a", train).status == "found"          # train's kept as it was
    assert culprits.get(conn, "S", good, bad, "a").status == "failed"
    assert commit_ranges(conn, {r.key: r}, train)[r.key].culprit == planted
    assert commit_ranges(conn, {r.key: r})[r.key].culprit is None
    assert culprits.mark_wrong(conn, "a", "S", "maya") is None        # eval's issue names no culprit to mark
    assert culprits.mark_wrong(conn, "a", "S", "maya", train).wrong_by == "maya"
    conn.close()


def test_the_culprit_command_searches_the_range_of_the_mode_it_names(tmp_path, capsys):
    """`flagsweep culprit --config a --signature S` answers from eval's stored range though a train night stored a
    newer one of the same (config, signature); `--modes train` answers from train's. Both were searched before
    (commit ranges kept per mode): nothing is installed or run. An unknown mode, two modes, or --modes with --repro
    are one line each."""
    import json

    from bot.cli.main import main
    from harness.core.modes import BUILTIN
    from harness.core.options import RunOptions, SweepOptions
    from state import culprits, db, ranges
    from state.culprits import Bisection, CommitRange
    from state.ranges import Build, Range
    from tests import historydata as hd

    state = tmp_path / "state.sqlite"
    conn = db.connect(state)
    train = BUILTIN["train"]
    in_eval, in_train = c("e", "torch/_dynamo/x.py", author="erin"), c("b", "torch/_dynamo/y.py", author="bob")
    for mode, (good, bad), culprit_of, night in (("", ("1" * 40, "2" * 40), in_eval, "2026-11-27"),
                                                 (train.key, ("3" * 40, "4" * 40), in_train, "2026-11-28")):
        options = RunOptions(sweep=dataclasses.replace(SweepOptions(), mode=train)) if mode else RunOptions()
        run = hd.store_run(conn, [hd.crash("GPT2Model", "a", sig="S")], kind="nightly", nightly=night, options=options)
        ranges.record(conn, Range(run_id=run, config="a", signature="S", kind="new_crash", status="found",
                                  good=Build("2026-11-26", "2.14.0.dev20261126+cpu", good),
                                  bad=Build(night, f"2.14.0.dev{night.replace('-', '')}+cpu", bad),
                                  models=["GPT2Model"]))
        culprits.record(conn, CommitRange("S", good, bad, "found", commits=[culprit_of], config="a", mode=mode,
                                          bisection=Bisection(culprit=culprit_of.sha, parent=good)))
    conn.close()
    argv = ["--state", str(state), "culprit", "--config", "a", "--signature", "S", "--checkout", str(tmp_path)]
    for extra, culprit_of in (([], in_eval), (["--modes", "train"], in_train), (["--mode", "eval"], in_eval)):
        assert main([*argv, *extra, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["bisection"]["culprit"] == culprit_of.sha, extra
    assert main([*argv, "--modes", "bf16"]) == 2
    assert "no stored regression range with both builds' commits for a / 'S' in mode bf16" in capsys.readouterr().err
    for mode, said in (("nope", "--modes: unknown mode 'nope' (known: bf16, "),
                       ("eval,train", "--modes eval,train: a stored range is one mode's; name one")):
        assert main([*argv, "--modes", mode]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"flagsweep culprit: {said}") and len(err.splitlines()) == 1, err
    script = tmp_path / "repro.py"
    script.write_text("")
    assert main(["--state", str(state), "culprit", "--repro", str(script), "--good", "1" * 40, "--bad", "2" * 40,
                 "--signature", "S", "--modes", "train", "--checkout", str(tmp_path)]) == 2
    assert "--modes picks a stored signature's range" in capsys.readouterr().err


# -- what the tracking issue says without a culprit ---------------------------------------------------------------
def _range(status: str, commits: list[Commit], reason: str | None = None):
    from state.culprits import CommitRange, SuspectRow
    return CommitRange("S", "1" * 40, "2" * 40, status, commits=commits, reason=reason,
                       suspects=[SuspectRow(x.sha, 100 - i, [f"changes {x.files[0].path}, the innermost torch frame"])
                                 for i, x in enumerate(commits)])


def test_suspects_are_shown_three_at_most_with_why_and_cc_by_the_rule():
    from bot.issues.culprit import attribute
    from bot.text.render import render
    three = [c(str(i), f"torch/_dynamo/f{i}.py", author=f"u{i}") for i in range(1, 4)]
    said = attribute(_range("flaky", three, "the reproducer is flaky at 111111111111: 1 of 3 runs failed with "
                                            "the signature, 2 passed; no culprit is named"), frozenset(), "pytorch/pytorch")
    assert said.cc == ["u1", "u2", "u3"]
    text = render("tracking_culprit.md.j2", culprit=said.section)
    assert "No culprit: the reproducer is flaky at 111111111111" in text
    assert "Suspected commits (of 3 in the range" in text and text.count("the innermost torch frame") == 3
    assert "by @u1 |" in text
    four = three + [c("4", "torch/_dynamo/f4.py", author="u4")]
    said = attribute(_range("cut", four, "the overlay search stops between the good build and 111111111111: it "
                                         "changes aten/x.cpp, which is not Python in the torch package"),
                     frozenset(), "a-fork/torch")
    text = render("tracking_culprit.md.j2", culprit=said.section)
    assert "](https://github.com/a-fork/torch/commit/" in text and "github.com/pytorch/pytorch" not in text  # [culprit] repo
    assert said.cc == [] and "| and 1 more | |" in text and "@u" not in text    # more than 3: nobody, no mention
    assert "by `u1`" in text and "No culprit: the overlay search stops between the good build" in text
    assert attribute(_range("suspects", three), frozenset({"u2"}), "pytorch/pytorch").cc == ["u1", "u3"]


def test_github_names_the_authors_git_cannot_for_the_commits_the_issue_shows(tmp_path, fake_github):
    from bot.pipeline import culprit as step
    from state import culprits, db
    from state.culprits import Bisection, CommitRange, SuspectRow
    fake_github.state.add_repo("pytorch/pytorch")
    shas = _seed(fake_github, 3)                     # shas[2]: bob's, with carol as co-author
    found = CommitRange("S", "1" * 40, "2" * 40, "found",
                        commits=[Commit(sha, f"change {i}", None) for i, sha in enumerate(shas[1:], 1)],
                        suspects=[SuspectRow(shas[3], 10)], bisection=Bisection(culprit=shas[2], parent=shas[1]))
    conn = db.connect(tmp_path / "state.sqlite")
    github = step.GitHubSource(GitHubPublisher(fake_github.settings()), "pytorch/pytorch", 500)
    named = step.with_logins(found, step.Checkout(tmp_path, github))
    culprits.record(conn, named)
    assert [c.author for c in named.commits] == [None, "bob", "alice"]      # the culprit and the shown suspect only
    assert culprits.get(conn, "S", "1" * 40, "2" * 40).culprit.author == "bob"
    assert len(fake_github.requests.matching("GET", r"/commits/[0-9a-f]+$")) == 2


# -- the commit that fixed it, in the close comment ------------------------------------------------------------------
def test_the_close_comment_names_the_fixing_commit_without_a_mention():
    from types import MappingProxyType

    from bot.issues.context import PlanSettings
    from bot.issues.plan import plan
    from state.culprits import Bisection, CommitRange
    from tests import test_planner as tp
    from tests.fakegithub import scenario as sc
    from tests.issueviews import inputs
    key, links = tp._quiet_setup(None, "open")
    gone = sc.corpus()
    gone["Model02ForCausalLM"][tp.CSO] = 3
    timeline = tp._awaiting(3, [tp._night("2026-11-21", "ok"), tp._night("2026-11-22", "ok")])
    fix = Commit("f" * 40, "[dynamo] fix abs (#1008)", "ivan", (FileChange("torch/_dynamo/x.py", "modified"),),
                 pr=1008, coauthors=(Person("Judy", "judy"),))
    searched = CommitRange(sc.SIG_B, "a" * 40, "b" * 40, "found", commits=[fix], config=tp.CSO,
                           bisection=Bisection(culprit=fix.sha, parent="a" * 40, fix=True))
    view = inputs(gone, links=links, ranges=[tp._range("fixed", sig=sc.SIG_B)])
    view = dataclasses.replace(view, culprits=MappingProxyType({(tp.CSO, sc.SIG_B, "fixed"): searched}))
    done = plan(view, timeline, PlanSettings(verify_nightlies=2, min_models=1))
    [comment] = [a for a in done.actions if a.key == key and a.action == "comment"]
    assert (f"Fixed by [`ffffffffffff`](https://github.com/pytorch/pytorch/commit/{'f' * 40}) "
            "([#1008](https://github.com/pytorch/pytorch/pull/1008)) by `ivan`: the first commit where the signature "
            "is gone") in comment.body
    assert "@ivan" not in comment.body and "@judy" not in comment.body
