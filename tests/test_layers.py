"""The layer contract (.importlinter): it holds for the tree, names every module, and fails on an arrow that climbs."""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("bot", "harness", "state")


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _layer_modules() -> set[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    lines = cfg["importlinter:contract:flow"]["layers"].split("\n")
    return {name.strip() for line in lines for name in line.replace("|", ":").split(":") if name.strip()}


def test_the_tree_keeps_the_contract():
    res = _lint(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 kept, 0 broken" in res.stdout


def test_every_module_has_a_layer():
    """A module left out of the contract would be free to import anything: each one is named (or its package is)."""
    named = _layer_modules()
    missing = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if len(parts) == 1:
                continue                   # the root packages' own __init__ (empty)
            dotted = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            if not any(d in named for d in dotted):
                missing.append(".".join(parts))
    assert missing == []


def test_the_contract_fails_when_the_engine_imports_the_bot(tmp_path):
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    engine = tmp_path / "harness" / "engine" / "engine.py"
    engine.write_text(engine.read_text() + "\nfrom bot.github import publish  # an arrow that climbs\n")
    res = _lint(tmp_path)
    assert res.returncode != 0
    assert "BROKEN" in res.stdout and "harness.engine.engine -> bot.github.publish" in res.stdout, res.stdout


def _planted(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """lint-imports over a copy of the tree where `module` (a path under the root) gained `line`."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{line}\n")
    return _lint(tmp_path)


def test_publishing_never_imports_the_verify_step(tmp_path):
    """The planner may import bot.verify as far as the layers go (verify sits below issues): the second contract
    says publishing only reads, so the import breaks it."""
    res = _planted(tmp_path, "bot/issues/planner.py", "from bot.verify import reproducers  # runs scripts")
    assert res.returncode != 0
    assert "Publishing only reads" in res.stdout and "bot.issues.planner -> bot.verify.reproducers" in res.stdout, \
        res.stdout
    assert "1 kept, 1 broken" in res.stdout       # the layers still hold: only the forbidden contract sees it


def test_publishing_never_reaches_the_engine_even_through_a_module_below(tmp_path):
    """An indirect import counts: bot.text may import the engine as far as the layers go, and the publisher
    imports bot.text, so the engine would be loaded on the publish path."""
    res = _planted(tmp_path, "bot/text/markdown.py", "from harness.engine import script_runner  # starts processes")
    assert res.returncode != 0
    assert "Publishing only reads" in res.stdout and "harness.engine.script_runner" in res.stdout, res.stdout


def test_the_store_is_the_only_sql():
    """No SQL statement is written outside state/: the bot and the engine read and write through store functions."""
    import ast
    import re

    sql = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|CREATE|PRAGMA)\b")
    found = []
    for pkg in ("bot", "harness"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and sql.match(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
