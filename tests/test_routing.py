"""cc routing rules: validation with the rule's line, union semantics, matchers."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot import settings as settings_mod
from bot.issues.routing import RoutingError, compile_rules, route

TOML = '''
[github]
repo = "octo/models"

[[routing.rule]]
signature = "PendingUnbacked|GuardOnDataDependent"
cc = ["ezyang", "@pytorch/compiler-team"]
labels = ["module: dynamic shapes"]

[[routing.rule]]
torch_file = "torch/_inductor/*"
cc = ["inductor-oncall"]

[[routing.rule]]
exception = "PendingUnbackedSymbolNotFound"
torch_file = "re:^torch/fx/experimental/"
cc = ["ezyang", "bobren"]
labels = ["oncall: pt2"]
'''


def load(tmp_path: Path, text: str):
    path = tmp_path / "flagsweep.toml"
    path.write_text(text)
    s = settings_mod.load(path, env={})
    return compile_rules(s.routing, s.source)


def test_union_of_matching_rules_in_rule_order(tmp_path: Path) -> None:
    rules = load(tmp_path, TOML)
    r = route(rules, "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN}", "PendingUnbackedSymbolNotFound",
              "torch/fx/experimental/symbolic_shapes.py:_check")
    assert r.cc == ["ezyang", "pytorch/compiler-team", "bobren"]
    assert r.labels == ["module: dynamic shapes", "oncall: pt2"]
    assert r.rules == [0, 2]


def test_every_matcher_of_a_rule_must_match(tmp_path: Path) -> None:
    rules = load(tmp_path, TOML)
    r = route(rules, "Unsupported: x", "PendingUnbackedSymbolNotFound", "torch/_dynamo/x.py:f")
    assert r.cc == [] and r.labels == []
    r = route(rules, "AssertionError: x", "AssertionError", "torch/_inductor/lowering.py:f")
    assert r.cc == ["inductor-oncall"]
    assert route(rules, None, None, None).cc == []


@pytest.mark.parametrize("bad, message", [
    ('signature = "(unclosed"\ncc = ["a"]', "bad regular expression"),
    ('signature = "x"\ncc = ["not a handle!"]', "is not a GitHub handle"),
    ('signature = "x"', "needs cc or labels"),
    ('cc = ["a"]', "needs at least one of"),
    ('signature = "x"\ncc = ["a"]\nteam = "b"', "unknown key(s) team"),
    ('signature = 3\ncc = ["a"]', "signature must be a string"),
])
def test_bad_rule_names_its_index_and_line(tmp_path: Path, bad: str, message: str) -> None:
    text = TOML + "\n[[routing.rule]]\n" + bad + "\n"
    line = text.splitlines().index("[[routing.rule]]", len(TOML.splitlines())) + 1
    with pytest.raises(RoutingError) as err:
        load(tmp_path, text)
    assert f"routing rule 4 ({tmp_path / 'flagsweep.toml'}, line {line})" in str(err.value)
    assert message in str(err.value)


def test_publish_fails_before_anything_runs_on_a_bad_rule(tmp_path: Path) -> None:
    from bot.cli.main import main
    path = tmp_path / "flagsweep.toml"
    path.write_text('[[routing.rule]]\nsignature = "("\ncc = ["a"]\n')
    from state import db
    from tests.fakegithub import scenario as sc
    conn = db.connect(tmp_path / "s.sqlite")
    sc.record_nightly(conn, "2026-11-20", sc.corpus())
    code = main(["--settings", str(path), "--state", str(tmp_path / "s.sqlite"), "publish", "--dry-run",
                 "--no-verify", "--out", str(tmp_path / "out")])
    assert code == 2 and not (tmp_path / "out").exists()
