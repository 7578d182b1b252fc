"""Test-only models for the modes (harness.core.modes), registered with the zoo when a worker imports this module.

`ModePlantedModel` carries a planted gradient-only wrong result: a custom autograd Function whose forward is the
identity and whose backward adds one to the gradient while capture_scalar_outputs is on, through an opaque op read at
run time (eager's backward runs without the flag, a compiled one under it). Its forward is the same under every
flag: eval never sees it; train does. It has no attention implementation to set, so `sdpa` cannot run it.
`ModeSizedModel` is the same model with an input spec (a second size among its later calls); `ModeRecordedModel`,
with the modes record a lock entry would seal (probed at import).
`ModeCastModel` carries a planted cast bug: under the flag and autocast, a value goes through float16 (overflowing);
eval, without autocast, never sees it.
"""
from __future__ import annotations

import torch

from harness.zoo import Built, register

FLAG = "capture_scalar_outputs"


@torch.library.custom_op("flagsweep_modes::planted_grad", mutates_args=())
def planted_grad(grad: torch.Tensor) -> torch.Tensor:
    """The gradient, shifted by one while the flag is on (read when the backward runs)."""
    return grad + 1 if torch._dynamo.config.capture_scalar_outputs else grad.clone()


@planted_grad.register_fake
def _planted_grad_fake(grad: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(grad)


class Planted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return torch.ops.flagsweep_modes.planted_grad(grad)


class PlantedModel(torch.nn.Module):
    """Token ids through an embedding, a dropout (p 0.5: train mode must zero it) and a linear layer."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.dropout = torch.nn.Dropout(0.5)
        self.linear = torch.nn.Linear(8, 8)
        self.drop_prob = 0.3   # stochastic depth as transformers' DropPath keeps it (unused here: zeroed in train)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.dropout(self.embed(input_ids))
        return self.linear(Planted.apply(hidden)).tanh()


def inputs(batch: int, length: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Token ids of the given batch and sequence length."""
    return {"input_ids": torch.arange(batch * length, device=device).reshape(batch, length) % 32}


def _build(device: str) -> Built:
    torch.manual_seed(0)
    return Built(module=PlantedModel().eval().to(device), inputs=inputs(2, 6, device), text_only=True,
                 fingerprint="test-modes", stratum="decoder_llm")


register("ModePlantedModel", "decoder_llm", _build)


def _build_sized(device: str) -> Built:
    """The planted model with its input spec: its later calls include a second size (the rule's, from the spec)."""
    import dataclasses

    return dataclasses.replace(_build(device), spec={"input_ids": {"kind": "ids", "shape": [2, 6], "high": 32}})


register("ModeSizedModel", "decoder_llm", _build_sized)


@torch.library.custom_op("flagsweep_modes::planted_cast", mutates_args=())
def planted_cast(hidden: torch.Tensor) -> torch.Tensor:
    """A planted cast bug: while the flag is on under autocast, the value goes through float16 (the wrong half type for
    a bfloat16 autocast: what float16 cannot hold becomes inf); else the value itself."""
    if torch._dynamo.config.capture_scalar_outputs and torch.is_autocast_enabled("cpu"):
        return hidden.to(torch.float16).to(hidden.dtype)
    return hidden.clone()


@planted_cast.register_fake
def _planted_cast_fake(hidden: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(hidden)


class CastModel(torch.nn.Module):
    """Token ids through an embedding, scaled past float16's range and back around the planted cast, and a linear
    layer (autocast runs it in the half type)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = torch.ops.flagsweep_modes.planted_cast(self.embed(input_ids) * 1e5) / 1e5
        return self.linear(hidden).tanh()


def _build_cast(device: str) -> Built:
    torch.manual_seed(0)
    return Built(module=CastModel().eval().to(device), inputs=inputs(2, 6, device), text_only=True,
                 fingerprint="test-modes-cast", stratum="decoder_llm")


register("ModeCastModel", "decoder_llm", _build_cast)


def _record() -> dict:
    """The modes record `zoo lock` would seal for the planted model: probed for real (harness.engine.mode_probe.probe)."""
    from harness.engine.mode_probe import probe

    built = _build("cpu")
    return probe(built.module, built.inputs)


# The planted model again, with the modes record a lock entry would carry: its attention cannot be set, so a sweep in
# `sdpa` skips it with the record's reason before building it (ModePlantedModel, without a record, is create_error).
register("ModeRecordedModel", "decoder_llm", _build, modes=_record())
