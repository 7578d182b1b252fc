"""`runs list`, `runs show` and `export` speak for one run (issue 31): a shard's own models, items, effects and rows,
with its group said, not mixed in; an environment_suspect run shows its verdict and reasons."""
from __future__ import annotations

import json

import pytest

from bot.cli.main import main
from state import db, gates
from tests import historydata as hd
from tests.helpers_cli import one_line, run_cli


@pytest.fixture
def shards(tmp_path):
    """(store path, [shard 1/2: Llama alone, shard 2/2: the others]) of one nightly."""
    path = tmp_path / "state.sqlite"
    conn = db.connect(path)
    night = hd.night()
    llama = [o for o in night if o.model == "LlamaForCausalLM"]
    others = [o for o in night if o.model != "LlamaForCausalLM"]
    ids = [hd.store_run(conn, part, kind="nightly", nightly="2026-11-02", shard=s)
           for part, s in ((llama, "1/2"), (others, "2/2"))]
    conn.close()
    return path, ids, len(llama), len(others)


def test_a_shard_is_shown_alone_and_its_group_is_named(shards, capsys):
    path, (first, second), n_llama, n_others = shards
    assert main(["--state", str(path), "runs", "show", str(first), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["summary"]["models"] == 1 and shown["summary"]["n_items"] == n_llama
    assert shown["summary"]["group"] == [first, second]
    assert sum(n for counts in shown["effects"].values() for n in counts.values()) == n_llama // 2   # per config

    assert main(["--state", str(path), "runs", "show", str(first)]) == 0
    text = capsys.readouterr().out
    assert "models    1\n" in text and f"items     {n_llama} " in text
    assert (f"group     shard 1/2 of a sharded nightly: the group holds runs {first}, {second}; "
            "the figures below are this run's alone") in text

    assert main(["--state", str(path), "runs", "list", "--json"]) == 0
    listed = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert (listed[first]["models"], listed[second]["models"]) == (1, 2)      # the same number `runs show` gives
    assert (listed[first]["n_items"], listed[second]["n_items"]) == (n_llama, n_others)

    assert main(["--state", str(path), "export", str(first), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == n_llama and {r["run_id"] for r in rows} == {first}
    assert {r["model"] for r in rows} == {"LlamaForCausalLM"}


def test_an_environment_suspect_run_shows_its_verdict_and_reasons(tmp_path, capsys):
    path = tmp_path / "state.sqlite"
    conn = db.connect(path)
    run_id = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    gates.record(conn, gates.EnvironmentVerdict(run_id=run_id, verdict=gates.SUSPECT, reasons=[
        {"kind": "canary", "model": "GPT2Model", "status": "create_error", "error": "ImportError"}]))
    conn.close()
    said = "Canary `GPT2Model` failed at baseline (create_error: ImportError)."
    assert main(["--state", str(path), "runs", "show", str(run_id)]) == 0
    assert f"  verdict   environment_suspect: nothing filed or closed. {said}\n" in capsys.readouterr().out
    assert main(["--state", str(path), "runs", "list"]) == 0
    assert f"environment_suspect: {said}" in capsys.readouterr().out
    assert main(["--state", str(path), "runs", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["verdict"] == "environment_suspect" and row["gate_reasons"][0]["model"] == "GPT2Model"


@pytest.fixture
def damaged(tmp_path):
    """A store of three comparable nightlies whose second's environment row cannot be read (a field this flagsweep
    does not know: written by a newer one, or edited)."""
    path = tmp_path / "state.sqlite"
    conn = db.connect(path)
    for date in ("2026-11-01", "2026-11-02", "2026-11-03"):
        hd.store_run(conn, hd.night(), kind="nightly", nightly=date)
    bad = conn.execute("INSERT INTO environments (key, torch_version, data) VALUES ('bad', '2.13.0', ?)",
                       (json.dumps({"torch_version": "2.13.0", "gpu_model": "x"}),)).lastrowid
    conn.execute("UPDATE runs SET environment_id = ? WHERE id = 2", (bad,))
    conn.close()
    return path


UNREADABLE = "run 2 cannot be read: run environment: unknown field 'gpu_model'"


@pytest.mark.parametrize("args", [["runs", "list"], ["runs", "list", "--json"], ["runs", "show", "3"], ["diff"],
                                  ["diff", "3"], ["report", "3", "-o", "r.md"]])
def test_a_run_that_cannot_be_read_is_named_once_and_the_others_go_on(damaged, tmp_path, capsys, caplog,
                                                                        monkeypatch, args):
    """Issue 38: one stored environment row that could not be read ended runs list, runs show, report and diff in a
    traceback: the listings leave that run out, naming it in one warning, and go on with the others."""
    monkeypatch.chdir(tmp_path)
    assert main(["--state", str(damaged), *args]) == 0
    out = capsys.readouterr().out
    assert [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()] == [f"{UNREADABLE}; left out"]
    if args[0] == "runs" and args[1] == "list":
        assert "--json" not in args or [r["id"] for r in json.loads(out)] == [3, 1]
    if args[0] == "diff":
        assert out.startswith("Run 1 -> run 3")                   # 3 against 1: run 2 is skipped, not compared


def test_an_unreadable_run_does_not_shorten_a_limited_listing(damaged, capsys):
    """The last stop's finding: `runs list --limit 2` read the two newest rows and left run 2 out: one run listed."""
    assert main(["--state", str(damaged), "runs", "list", "--limit", "2", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [3, 1]


@pytest.mark.parametrize("args", [["runs", "show", "2"], ["export", "2"], ["report", "2"], ["diff", "2", "3"],
                                  ["diff", "2"]])
def test_a_run_that_cannot_be_read_asked_for_by_id_is_one_line_and_exit_1(damaged, capsys, args):
    code, err = run_cli(capsys, "--state", str(damaged), *args)
    assert code == 1 and one_line(err) == f"flagsweep: {UNREADABLE}"
