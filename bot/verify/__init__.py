"""Reproducers: rendered from what a run stored, verified, shrunk, their failing component isolated."""
