"""Recipe fingerprints: a hash of everything that determines a model's build and inputs."""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

# The zoo sources whose change changes what a build means.
SOURCES = ("shrink.py", "specs.py", "inputs.py", "build.py", "fixups.py", "probe.py", "recipes.py", "recipes.toml")


@lru_cache(maxsize=1)
def zoo_code_version() -> str:
    """A short hash of the zoo's own build code and recipe data."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in SOURCES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:12]


def digest(payload: dict) -> str:
    """A stable short hash of JSON-able data."""
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
