"""The zoo and the engine, over the domain core (see ARCHITECTURE.md for the package tree)."""
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent   # the checkout (or site-packages) holding bot/, harness/, state/
