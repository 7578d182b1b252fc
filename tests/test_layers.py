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
    assert "3 kept, 0 broken" in res.stdout


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


def _lint_with(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """lint-imports over a copy of the tree where `module` (a path under the root) has one more line."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{line}\n")
    return _lint(tmp_path)


def test_the_contract_fails_when_the_engine_imports_the_bot(tmp_path):
    res = _lint_with(tmp_path, "harness/engine/engine.py", "from bot.github import publish  # an arrow that climbs")
    assert res.returncode != 0
    assert "BROKEN" in res.stdout and "harness.engine.engine -> bot.github.publish" in res.stdout, res.stdout


def test_the_contract_fails_when_the_zoo_imports_discovery(tmp_path):
    res = _lint_with(tmp_path, "harness/zoo/build.py", "from harness.discovery import discover  # sweeps would discover")
    assert res.returncode != 0
    assert "Contracts: 1 kept, 2 broken." in res.stdout, res.stdout  # the layers and the zoo-not-discovery contracts
    assert "harness.zoo.build -> harness.discovery.discover" in res.stdout, res.stdout


def test_the_contract_fails_when_discovery_starts_a_process(tmp_path):
    res = _lint_with(tmp_path, "harness/discovery/locker.py", "import subprocess  # the engine runs interpreters")
    assert res.returncode != 0
    assert "harness.discovery.locker -> subprocess" in res.stdout, res.stdout
    assert "Contracts: 2 kept, 1 broken." in res.stdout, res.stdout


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
