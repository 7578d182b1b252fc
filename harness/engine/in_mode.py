"""A model run in a mode (harness.core.modes), in the worker: the module prepared, the call's context, the compile's
arguments and the training step. The default mode (`eval`) changes nothing here: its items run as before modes.

- prepare: the attention implementation set on the built model (transformers' own `set_attn_implementation`);
  in `train`, `model.train()` with every dropout probability 0 (train-mode dropout is the first source of false
  divergences: two runs of one model would never agree);
- context: autocast to the mode's dtype (CPU or CUDA), and grad on only in `train`;
- compile: `dynamic=True` for dynamic `true`; for `marked`, the batch dimension of every tensor input and the
  sequence dimension of every integer one (token ids, masks) marked with `maybe_mark_dynamic`;
- step: the call, and in `train` a loss and its backward (the model's own loss where labels can be built: its
  `labels` are its `input_ids`; else a fixed reduction of its float outputs), then each parameter's gradient;
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch

if TYPE_CHECKING:    # annotations only: a reproducer inlines this module (bot/verify/script.py) without flagsweep
    from harness.core.modes import Mode

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
# transformers' heads that compute their own loss from `labels` shaped as `input_ids`. This and RANDOM_IN_TRAINING:
# the one place of these rules (bot.verify.maintainer reads them from this source for the scripts' own lines),
# so each stays a literal tuple of strings.
OWN_LOSS = ("ForCausalLM", "ForMaskedLM")


class CannotRun(Exception):
    """The model cannot be run in this mode (its reason): the mode's items are create_error, never crashes."""


def prepare(module: torch.nn.Module, mode: Mode) -> None:
    """Set the mode's attention implementation and phase on a built module (CannotRun with the reason)."""
    if mode.attention != "default":
        setter = getattr(module, "set_attn_implementation", None)
        if setter is None:
            raise CannotRun(f"{type(module).__name__} has no attention implementation to set")
        try:
            setter(mode.attention)
        except (ValueError, ImportError, NotImplementedError) as exc:
            raise CannotRun(f"attention {mode.attention}: {type(exc).__name__}: {str(exc)[:200]}") from None
    if mode.train:
        module.train()
        no_dropout(module)


# The float attributes (of a module or its config) that make training random: dropout probabilities as attention code
# passes them (`dropout_p`), stochastic depth (`drop_prob`, `drop_path_rate`) and layer drop (`layerdrop`).
RANDOM_IN_TRAINING = ("dropout", "drop_prob", "drop_path", "layerdrop")


def no_dropout(module: torch.nn.Module) -> None:
    """Every dropout probability 0: each Dropout module's `p`, and each float attribute of a module or of the
    model's config that `RANDOM_IN_TRAINING` names."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd):
            sub.p = 0.0
        _zero_random(sub)
    config = getattr(module, "config", None)
    if config is not None:
        _zero_random(config)


def _zero_random(owner: object) -> None:
    for name, value in list(vars(owner).items()):
        if isinstance(value, float) and any(word in name for word in RANDOM_IN_TRAINING):
            setattr(owner, name, 0.0)


@contextlib.contextmanager
def context(mode: Mode, device: str = "cpu") -> Iterator[None]:
    """The block runs as the mode does: autocast to its dtype, grad only in train."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.enable_grad() if mode.train else torch.no_grad())
        if mode.half:
            stack.enter_context(torch.autocast(device.split(":")[0], dtype=_DTYPES[mode.dtype]))
        yield


def compile_kwargs(mode: Mode) -> dict[str, Any]:
    """torch.compile's arguments beyond the backend."""
    return {"dynamic": True} if mode.dynamic == "true" else {}


def mark(inputs: dict[str, Any], mode: Mode) -> None:
    """For dynamic `marked`: batch (dim 0) of every tensor input, sequence (dim 1) of every integer one."""
    if mode.dynamic != "marked":
        return
    for value in inputs.values():
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            torch._dynamo.maybe_mark_dynamic(value, 0)
            if value.dim() >= 2 and not value.is_floating_point():
                torch._dynamo.maybe_mark_dynamic(value, 1)


def with_labels(module: torch.nn.Module, inputs: dict[str, Any], mode: Mode) -> dict[str, Any]:
    """The inputs of a train step: `labels` added where the model's own loss can take them."""
    if not mode.train or "labels" in inputs or "input_ids" not in inputs:
        return inputs
    if not type(module).__name__.endswith(OWN_LOSS):
        return inputs
    if "labels" not in inspect.signature(module.forward).parameters:
        return inputs
    return {**inputs, "labels": inputs["input_ids"].clone()}


def loss_of(output: Any) -> torch.Tensor:
    """The model's own loss where it returned one; else the sum of the means of its floating outputs (fixed: the
    same reduction for eager and every config)."""
    own = getattr(output, "loss", None)
    if isinstance(own, torch.Tensor):
        return own.float()
    found = [t for t in _tensors(output) if t.is_floating_point() and t.requires_grad]
    if not found:
        raise CannotRun("no floating output carries a gradient: there is nothing to train")
    return torch.stack([t.float().mean() for t in found]).sum()


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif hasattr(value, "to_tuple"):   # transformers' ModelOutput
        yield from _tensors(value.to_tuple())


@dataclass
class Stepped:
    """One call in a mode: its output, and in train its gradients (parameter name -> gradient, None where unused)."""

    output: Any
    grads: dict[str, torch.Tensor | None] | None = None


def step(module: torch.nn.Module, call: Callable[..., Any], inputs: dict[str, Any], mode: Mode,
         device: str = "cpu") -> Stepped:
    """Call `call` (the module, or its compiled form) on `inputs` in the mode; in train the loss's backward too."""
    if not mode.train:
        with context(mode, device):
            return Stepped(call(**inputs))
    module.zero_grad(set_to_none=True)
    with context(mode, device):
        output = call(**with_labels(module, inputs, mode))
        loss = loss_of(output)
    loss.backward()
    grads = {name: None if p.grad is None else p.grad.detach().clone() for name, p in module.named_parameters()}
    return Stepped(_detached(output), grads)


def _detached(value: Any) -> Any:
    """An output without its graph (not held past the step)."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if hasattr(value, "to_tuple") and isinstance(value, dict):
        for key in list(value.keys()):
            value[key] = _detached(value[key])
        return value
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_detached(v) for v in value)
    return value
