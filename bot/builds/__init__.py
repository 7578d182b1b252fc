"""Torch builds by name: the wheel index, the provider and its cached venvs."""
