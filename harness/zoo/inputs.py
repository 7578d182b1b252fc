"""Materialize a model's inputs from a plain-data spec, with torch alone.

This module is stdlib + torch only and self-contained on purpose: the
reproducer inlines its source, so a standalone script re-creates exactly the
inputs that the sweep used. Keep it that way (no flagsweep or transformers imports).

A spec maps a forward argument name to one of:
  {"kind": "ids", "shape": [B, S], "high": H, "avoid": [ids], "prefix": [[id, n], ...]}
  {"kind": "ones" | "zeros", "shape": [...], "dtype": "long" | "float" | "bool"}
  {"kind": "randn", "shape": [...], "scale": 1.0}
  {"kind": "rand", "shape": [...]}
  {"kind": "randint", "shape": [...], "high": H}
  {"kind": "tensor", "value": nested list, "dtype": "long" | "float" | "bool"}
  {"kind": "arange", "shape": [B, S], "dtype": "long"}   (positions per row)
  {"kind": "value", "value": any JSON value}            (passed through)
  {"kind": "list", "items": [spec, ...]}                 (a Python list of tensors)
  {"kind": "typed", "shape": [B, S], "prefix": [[value, n], ...]}  (per-token type ids: prefix, then zeros)
  {"kind": "bbox", "shape": [B, S, 4], "high": H}       (boxes with x0 <= x1, y0 <= y1)
"""
from __future__ import annotations

import torch

DTYPES = {"long": torch.long, "float": torch.float32, "bool": torch.bool, "int": torch.int32}


def _ids(spec: dict, gen: torch.Generator) -> torch.Tensor:
    batch, length = spec["shape"]
    prefix = [tid for tid, count in spec.get("prefix", []) for _ in range(count)]
    tail = length - len(prefix)
    low = spec.get("low", 0)
    high = max(low + 1, spec["high"])
    x = torch.randint(low, high, (batch, tail), generator=gen)
    avoid = [a for a in spec.get("avoid", []) if low <= a < high]
    if avoid:
        allowed = torch.tensor(sorted(set(range(low, min(high, low + 4096))) - set(avoid)) or [low])
        bad = torch.isin(x, torch.tensor(avoid))
        x[bad] = allowed[x[bad] % len(allowed)]
    if prefix:
        x = torch.cat([torch.tensor(prefix, dtype=torch.long).expand(batch, -1), x], dim=1)
    return x


def make_one(spec: dict, gen: torch.Generator, device: str) -> object:
    """One input value from its spec."""
    kind = spec["kind"]
    dtype = DTYPES[spec.get("dtype", "float" if kind in ("randn", "rand") else "long")]
    if kind == "ids":
        out = _ids(spec, gen)
    elif kind == "ones":
        out = torch.ones(spec["shape"], dtype=dtype)
    elif kind == "zeros":
        out = torch.zeros(spec["shape"], dtype=dtype)
    elif kind == "randn":
        out = torch.randn(spec["shape"], generator=gen) * spec.get("scale", 1.0)
    elif kind == "rand":
        out = torch.rand(spec["shape"], generator=gen)
    elif kind == "randint":
        out = torch.randint(spec.get("low", 0), spec["high"], spec["shape"], generator=gen, dtype=dtype)
    elif kind == "tensor":
        out = torch.tensor(spec["value"], dtype=dtype)
    elif kind == "arange":
        batch, length = spec["shape"]
        out = torch.arange(length, dtype=dtype).expand(batch, length).contiguous()
    elif kind == "typed":
        batch, length = spec["shape"]
        out = torch.zeros(batch, length, dtype=dtype)
        at = 0
        for value, count in spec["prefix"]:
            out[:, at : at + count] = value
            at += count
    elif kind == "bbox":
        a = torch.randint(0, spec.get("high", 1000) // 2, spec["shape"], generator=gen)
        out = torch.cat([a[..., :2], a[..., :2] + a[..., 2:]], dim=-1).to(dtype)
    elif kind == "value":
        return spec["value"]
    elif kind == "list":
        return [make_one(item, gen, device) for item in spec["items"]]
    else:
        raise ValueError(f"unknown input kind {kind!r}")
    return out.to(device)


def make_inputs(spec: dict, seed: int = 0, device: str = "cpu") -> dict:
    """All inputs of a spec as a kwargs dict, deterministic for a seed."""
    gen = torch.Generator().manual_seed(seed)
    return {name: make_one(item, gen, device) for name, item in spec.items()}
