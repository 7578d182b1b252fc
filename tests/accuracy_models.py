"""Test-only models for the later calls and the accuracy oracle, registered when a worker imports this module.

Workers import it through SweepOptions(extra_modules=["tests.accuracy_models"]) (tests/test_scenarios.py).
TinyLM takes token ids (a spec the second-size rule lengthens and widens) and, while being traced under
capture_scalar_outputs, adds 0.1 to its hidden state: the transformers pattern of another code path while compiling
(is_compiling()), made large, so that one flag's first call is wrong and the baseline's is not. It is built from a
transformers-style config (TinyLMConfig), so the worker stores its build and a reproducer can be rendered from it;
`expose()` puts these classes in transformers' namespace, where a rendered script looks them up (a test's run
interpreter, tests/accuracy_python.py, calls it before it runs a script).
"""
from __future__ import annotations

import torch
import transformers

from harness.zoo import Built, register
from harness.zoo.inputs import make_inputs

SPEC = {"input_ids": {"kind": "ids", "shape": [2, 16], "high": 50}}
SHIFT = 0.1
NOISE = torch.Generator().manual_seed(1)   # never reset by the harness's seeds: eager run twice differs


class TinyLMConfig(transformers.PretrainedConfig):
    model_type = "tiny_lm"

    def __init__(self, vocab_size: int = 50, hidden_size: int = 8, out_features: int = 4, **kwargs: object) -> None:
        self.vocab_size, self.hidden_size, self.out_features = vocab_size, hidden_size, out_features
        super().__init__(**kwargs)


CONFIG = {"vocab_size": 50, "hidden_size": 8, "out_features": 4}


class TinyLM(torch.nn.Module):
    def __init__(self, config: TinyLMConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or TinyLMConfig(**CONFIG)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.mix = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.head = torch.nn.Linear(config.hidden_size, config.out_features)

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        hidden = torch.tanh(self.mix(self.embed(input_ids)))
        if torch.compiler.is_compiling() and torch._dynamo.config.capture_scalar_outputs:
            hidden = hidden + SHIFT
        return {"last_hidden_state": hidden, "logits": self.head(hidden)}


@torch.compiler.disable
def _noise(x: torch.Tensor) -> torch.Tensor:
    return torch.rand(x.shape, generator=NOISE)


class NoisyLM(TinyLM):
    """Eager forward that is not deterministic: noise from its own generator, which no seed reset reaches."""

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        out = super().forward(input_ids)
        return {**out, "logits": out["logits"] + _noise(out["logits"])}


class BuiltinsLM(TinyLM):
    """Looks up builtins while traced (`getattr`, `len`): Dynamo guards them in a worker's first compile only."""

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        mix = getattr(self, "mix")
        hidden = torch.tanh(mix(self.embed(input_ids))) * len(input_ids.shape)
        return {"last_hidden_state": hidden, "logits": self.head(hidden)}


@torch._dynamo.assume_constant_result
def _late_flag() -> bool:
    # Called while tracing, its result a constant of the graph: the read is recorded, never guarded.
    return bool(torch._dynamo.config.capture_scalar_outputs)


class LateFlagLM(TinyLM):
    """Reads capture_scalar_outputs whenever it is traced (unguarded), but acts on it only at a longer sequence than
    its first (the second-size recompile): the first call is the baseline's, by code and guards, the later call is
    not. The answer screen cannot see this (the key is read in the first window too); the audit must."""

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        late = torch.compiler.is_compiling() and _late_flag()
        hidden = torch.tanh(self.mix(self.embed(input_ids)))
        if late and input_ids.shape[1] > 16:   # longer than SPEC's: the second size
            hidden = hidden + SHIFT
        return {"last_hidden_state": hidden, "logits": self.head(hidden)}


def _builder(cls: type) -> object:
    def build(device: str) -> Built:
        torch.manual_seed(0)
        return Built(cls().eval().to(device), make_inputs(SPEC, 0, device), stratum="decoder_llm", spec=SPEC,
                     config=dict(CONFIG))
    return build


def expose() -> None:
    """TinyLM, TinyNoisyLM and TinyLMConfig as transformers attributes (a rendered script's `transformers.TinyLM`)."""
    for name, cls in (("TinyLMConfig", TinyLMConfig), ("TinyLM", TinyLM), ("TinyNoisyLM", NoisyLM)):
        setattr(transformers, name, cls)


register("TinyLM", "decoder_llm", _builder(TinyLM))
register("TinyNoisyLM", "decoder_llm", _builder(NoisyLM))
register("TinyLateFlagLM", "decoder_llm", _builder(LateFlagLM))
# A second spec as a lock entry would seal it, malformed: its second_size call is lost, nothing else.
register("TinyCorruptSecondLM", "decoder_llm", _builder(TinyLM),
         second_spec={"input_ids": {"kind": "ids", "shape": "twenty-four"}})
