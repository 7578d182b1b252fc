"""The import contracts (.importlinter): they hold for the tree, name every module, and each one fails on a planted import.

The package tree is the layer picture: one package per line of the layers contract. The forbidden
contracts add the rules a layer order cannot say (the zoo runtime never imports discovery, publishing
never reaches the engine, only the engine and verification start processes).
"""
from __future__ import annotations

import ast
import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("bot", "harness", "state")


def _config() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    return cfg


def _contracts(kind: str) -> dict[str, configparser.SectionProxy]:
    """{contract id: section} of one contract type."""
    cfg = _config()
    return {name.split(":")[-1]: cfg[name] for name in cfg.sections()
            if name.startswith("importlinter:contract:") and cfg[name]["type"] == kind}


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.split("\n") if line.strip()]


def _layer_lines() -> list[list[str]]:
    """The layers, top first, each a list of its sibling packages."""
    (flow,) = _contracts("layers").values()
    return [[name.strip() for name in re.split(r"[|:]", line)] for line in _lines(flow["layers"])]


def _lint(cwd: Path, *contracts: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd), COLUMNS="400")
    args = [a for c in contracts for a in ("--contract", c)]
    return subprocess.run([str(LINT), "--no-cache", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _copy_tree(tmp_path: Path) -> Path:
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def _module_file(root: Path, module: str) -> Path:
    path = root.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _plant(root: Path, module: str, line: str) -> None:
    path = _module_file(root, module)
    path.write_text(path.read_text() + f"\n{line}  # planted by tests/test_layers.py\n")


def test_the_tree_keeps_every_contract():
    res = _lint(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert " 0 broken" in res.stdout


def test_each_layer_is_one_package():
    """No line of siblings that may import each other: a line is one package, or independent ones (`|`)."""
    flow = next(iter(_contracts("layers").values()))
    assert ":" not in flow["layers"]
    for siblings in _layer_lines():
        for name in siblings:
            assert _module_file(ROOT, name).exists(), name


def test_every_module_has_a_layer():
    """A module left out of the contract would be free to import anything: each one's package is named."""
    named = {name for siblings in _layer_lines() for name in siblings}
    missing = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if len(parts) == 1:
                continue                   # the root packages' own __init__
            dotted = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            if not any(d in named for d in dotted):
                missing.append(".".join(parts))
    assert missing == []


def test_the_layers_contract_fails_when_the_engine_imports_the_bot(tmp_path):
    root = _copy_tree(tmp_path)
    _plant(root, "harness.engine.engine", "from bot.github import publish")
    res = _lint(root, "flow")
    assert res.returncode != 0
    assert "BROKEN" in res.stdout and "harness.engine.engine -> bot.github.publish" in res.stdout, res.stdout


@pytest.mark.parametrize("contract", sorted(_contracts("forbidden")))
def test_each_forbidden_contract_fails_on_a_planted_import(tmp_path, contract):
    """Each forbidden contract holds today and breaks when its first source imports its first forbidden module."""
    section = _contracts("forbidden")[contract]
    source, forbidden = _lines(section["source_modules"])[0], _lines(section["forbidden_modules"])[0]
    assert _lint(ROOT, contract).returncode == 0
    root = _copy_tree(tmp_path)
    _plant(root, source, f"import {forbidden}")
    res = _lint(root, contract)
    assert res.returncode != 0 and "BROKEN" in res.stdout, res.stdout


def test_the_modules_of_a_package_are_distinct_concepts():
    """No two modules directly in a package share a name stem (no plan_*/shrink_* families)."""
    problems = []
    for pkg in PACKAGES:
        for folder in [ROOT / pkg, *(p.parent for p in (ROOT / pkg).rglob("__init__.py"))]:
            modules = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
            stems: dict[str, list[str]] = {}
            for m in modules:
                stems.setdefault(m.split("_")[0], []).append(m)
            problems += [f"{folder.relative_to(ROOT)}: {sorted(ms)}" for ms in stems.values() if len(ms) > 1]
    assert problems == []


def test_publishing_never_imports_the_verify_step(tmp_path):
    """The planner may import bot.verify as far as the layers go (verify sits below issues): the forbidden
    contract says publishing only reads, so the import breaks it while the layers still hold."""
    root = _copy_tree(tmp_path)
    _plant(root, "bot.issues.plan", "from bot.verify import reproducers")
    res = _lint(root)
    assert res.returncode != 0
    assert "bot.issues.plan -> bot.verify.reproducers" in res.stdout, res.stdout
    assert _lint(root, "flow").returncode == 0


def test_publishing_never_reaches_the_engine_even_through_a_module_below(tmp_path):
    """An indirect import counts: bot.text may import the engine as far as the layers go, and the publisher
    imports bot.text, so the engine would be loaded on the publish path."""
    root = _copy_tree(tmp_path)
    _plant(root, "bot.text.markdown", "from harness.engine import script_runner")
    res = _lint(root)
    assert res.returncode != 0 and "harness.engine.script_runner" in res.stdout, res.stdout


def test_the_store_is_the_only_sql():
    """No SQL statement is written outside state/: the bot and the engine read and write through store functions."""
    sql = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|CREATE|PRAGMA)\b")
    found = []
    for pkg in ("bot", "harness"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and sql.match(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
