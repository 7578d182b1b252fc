"""Per-family recipes, kept as data in recipes.toml, applied after the generic shrink."""
from __future__ import annotations

import copy
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

RECIPES_PATH = Path(__file__).with_name("recipes.toml")


@lru_cache(maxsize=1)
def load_recipes() -> dict[str, dict]:
    """All recipes by model_type or class name."""
    return tomllib.loads(RECIPES_PATH.read_text())


def recipe_for(model: str, model_type: str | None) -> dict:
    """The merged recipe for a class: its model_type's entry, then its own."""
    recipes = load_recipes()
    out: dict = {}
    for key in (model_type, model):
        if key and key in recipes:
            out.update(recipes[key])
    return out


def _set(d: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def apply_config(cfg: dict, recipe: dict) -> dict:
    """cfg with the recipe's `config` overrides applied (dotted paths)."""
    out = copy.deepcopy(cfg)
    for path, value in recipe.get("config", {}).items():
        _set(out, path, value)
    return out
