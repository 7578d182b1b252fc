"""A train crash seen under the `eager` backend: the sweep's worker compiles the backward through AOTAutograd under
every backend (harness.engine.backend), so its reproducers must too (harness.core.modes.Mode.compiles_under). The real
nightly in train under `[sweep] backend = "eager"` (the reproducer fails as filed, the crash is AOTAutograd's, the
maintainer's script names aot_eager) is tests/test_modes_issues.py's two-mode nightly, which runs under that backend."""
from __future__ import annotations

from harness.core.modes import BUILTIN, DEFAULT


def test_a_train_step_compiles_as_aot_eager_under_the_counting_and_eager_backends_and_eval_as_it_says() -> None:
    train = BUILTIN["train"]
    assert [train.compiles_under(b) for b in ("count", "eager", "aot_eager", "inductor")] == \
        ["aot_eager", "aot_eager", "aot_eager", "inductor"]
    assert [DEFAULT.compiles_under(b) for b in ("count", "eager")] == ["count", "eager"]
    assert BUILTIN["bf16"].compiles_under("eager") == "eager"
