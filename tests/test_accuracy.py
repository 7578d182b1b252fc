"""The accuracy oracle on tensors (harness.engine.accuracy) and its fp64 references (harness.engine.scenarios), the
second-size rule (harness.zoo.sizes.second_specs) and its check (harness.zoo.second), and the [accuracy] settings:
in-process, no compile."""
import copy
import math

import pytest
import torch
from transformers import DynamicCache

from bot import settings
from harness.engine.accuracy import Fp64, as_close_as_eager, bitwise, bounded, compare, leaves
from harness.core.options import Accuracy
from harness.engine.scenarios import References, weights_moved
from harness.zoo import Built
from harness.zoo import CorruptEntry
from harness.zoo.second import check
from harness.zoo.sizes import second_specs

TOL = {"rtol": 1e-3, "atol": 1e-3}


def test_bitwise_equal_is_exact_and_within_tolerance_is_close():
    x = torch.randn(2, 3)
    assert compare({"logits": x}, {"logits": x.clone()}, **TOL).accuracy == "exact"
    close = compare({"logits": x}, {"logits": x + 1e-5}, **TOL)
    assert close.accuracy == "close" and "max abs diff" in close.detail


def test_beyond_tolerance_the_fp64_reference_arbitrates_and_the_first_wrong_output_is_named():
    x = torch.randn(4, 8)
    exact64, off = x.double(), x.clone()
    off[0, 3] += 0.5
    wrong = compare({"a": x, "b": [x, x]}, {"a": x, "b": [x, off]}, **TOL,
                    fp64=Fp64(lambda: {"a": exact64, "b": [exact64, exact64]}))
    assert (wrong.accuracy, wrong.output) == ("wrong", "b[1]") and "max abs diff 5.00e-01" in wrong.detail
    assert "at (0, 3)" in wrong.detail
    # eager itself is as far from fp64 as the compiled result: close, not wrong
    eager = x + 0.01
    close = compare({"a": eager}, {"a": x}, **TOL, fp64=Fp64(lambda: {"a": (x + 0.005).double()}))
    assert close.accuracy == "close" and "fp64" in close.detail
    # no fp64 run to ask (it failed): never called wrong on tolerance alone
    def refuses():
        raise RuntimeError("expected scalar type Float but found Double")
    unjudged = compare({"a": x}, {"a": x + 1}, **TOL, fp64=Fp64(refuses))
    assert unjudged.accuracy == "not_judged" and "fp64 reference failed" in unjudged.detail


def test_structure_is_compared_before_values():
    x = torch.zeros(2, 3)
    assert compare({"logits": x}, {"logits": x, "extra": x}, **TOL).accuracy == "wrong"
    shape = compare({"logits": x}, {"logits": torch.zeros(3, 2)}, **TOL)
    assert (shape.accuracy, shape.output) == ("wrong", "logits") and "shape" in shape.detail
    assert compare({"n": 3}, {"n": 4}, **TOL).accuracy == "wrong"


def test_caches_are_compared_by_their_tensors_and_metadata_is_listed_not_judged():
    def cache(shift: float) -> DynamicCache:
        c = DynamicCache()
        c.update(torch.ones(1, 2, 3, 4) + shift, torch.ones(1, 2, 3, 4), layer_idx=0)
        return c
    assert [leaf.path for leaf in leaves({"past_key_values": cache(0)})] == ["past_key_values[0][0]", "past_key_values[0][1]"]
    verdict = compare({"past_key_values": cache(0)}, {"past_key_values": cache(1)}, **TOL,
                      fp64=Fp64(lambda: {"past_key_values": cache(0)}))
    assert (verdict.accuracy, verdict.output) == ("wrong", "past_key_values[0][0]")
    x = torch.randn(4, 6)
    strided = compare({"h": x}, {"h": x.t().contiguous().t()}, **TOL)
    assert strided.accuracy == "exact" and strided.metadata == ["h: strides (6, 1) in eager, (1, 4) compiled"]


def test_the_second_size_rule_lengthens_token_axes_and_widens_the_batch_where_every_input_allows():
    spec = {"input_ids": {"kind": "ids", "shape": [2, 16], "high": 9}, "attention_mask": {"kind": "ones", "shape": [2, 16]},
            "pixel_values": {"kind": "randn", "shape": [2, 3, 8, 8]}}
    both, seq, batch = second_specs(spec)
    assert both["input_ids"]["shape"] == [3, 24] and both["pixel_values"]["shape"] == [3, 3, 8, 8]
    assert seq["attention_mask"]["shape"] == [2, 24] and seq["pixel_values"] == spec["pixel_values"]
    assert batch["input_ids"]["shape"] == [3, 16]
    # inputs listed per image (a grid) keep the batch; media alone keep their sizes: batch only
    grid = {**spec, "image_grid_thw": {"kind": "tensor", "value": [[1, 2, 2]] * 2}}
    assert [s["input_ids"]["shape"] for s in second_specs(grid)] == [[2, 24]]
    assert [s["pixel_values"]["shape"] for s in second_specs({"pixel_values": spec["pixel_values"]})] == [[3, 3, 8, 8]]


@pytest.mark.parametrize("bad, field", [
    ("big", "second_spec"),
    ({"input_ids": {"kind": "ids", "shape": [2, 24]}, "extra": {"kind": "ones", "shape": [2]}}, "second_spec"),
    ({"input_ids": {"kind": "ids", "shape": [2, -1]}}, "second_spec.input_ids"),
    ({"input_ids": {"shape": [2, 24]}}, "second_spec.input_ids"),
])
def test_a_corrupt_second_spec_is_named_with_its_entry(bad, field):
    with pytest.raises(CorruptEntry, match=rf"'M' is corrupt: field '{field}'") as raised:
        check("M", bad, {"input_ids": {"kind": "ids", "shape": [2, 16]}})
    assert raised.value.field == field


def test_the_accuracy_section_reaches_the_engine_options(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text("[accuracy]\nrtol = 1e-2\nenabled = false\n")
    options = settings.load(good, env={}).sweep_options()
    assert (options.accuracy.enabled, options.accuracy.rtol, options.accuracy.atol) == (False, 1e-2, 1e-3)


class _Mixer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mix, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.head(torch.tanh(self.mix(x)))}


def test_each_calls_fp64_reference_is_run_once_for_every_config_of_the_group():
    torch.manual_seed(0)
    refs = References("M", Built(_Mixer().eval(), {"x": torch.randn(3, 4)}), "cpu", Accuracy())
    hook = next(s for s in refs.steps if s.scenario == "hook_added")
    off = {"logits": refs.first["logits"] + 0.5}
    verdicts = [refs.judge(step, res) for _config in range(3)
                for step, res in ((None, off), (hook, {"logits": refs.outputs["hook_added"]["logits"] + 0.5}))]
    assert refs.fp64_runs == 2   # the first call's and the hook's, not once per config
    assert {v.accuracy for v in verdicts} == {"wrong"} and verdicts[0] == verdicts[2] and verdicts[1] == verdicts[3]
    assert refs.judge(None, {"logits": refs.first["logits"]}).accuracy == "exact" and refs.fp64_runs == 2


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    """(name, eager, compiled, fp64, tol) around each step of same()'s rule."""
    g = torch.Generator().manual_seed(0)
    exact = torch.randn(40, 50, generator=g, dtype=torch.float64)
    eager = (exact + 1e-6 * torch.randn(40, 50, generator=g, dtype=torch.float64)).float()
    def noisy(scale: float, shape: tuple = (40, 50)) -> torch.Tensor:
        return eager.reshape(shape) + scale * torch.randn(shape, generator=g)
    nan_eager = eager.clone()
    nan_eager[3, 4] = float("nan")
    one_by_one = exact.reshape(500, 4, 1, 1)
    return [("allclose at tol", eager, noisy(1e-5), exact, 1e-4), ("far", eager, noisy(1e-1), exact, 1e-4),
            ("as near fp64 as eager", eager, eager + 1.5e-6, exact, 1e-7),
            ("beyond the multiplier", eager, eager + 3e-6, exact, 1e-7),
            ("small tensor", eager[:20, :20], eager[:20, :20] + 2.5e-6, exact[:20, :20], 1e-7),
            ("1x1 kernels", eager.reshape(500, 4, 1, 1), eager.reshape(500, 4, 1, 1) + 2.5e-6, one_by_one, 1e-7),
            ("loose tol", eager, noisy(3e-2), exact, 2e-2), ("half", eager.half(), eager.half() + 2e-3, exact, 1e-4),
            ("eager's NaN, compiled near fp64", nan_eager, eager + 1e-2, exact, 1e-4),
            ("compiled NaN", eager, nan_eager, exact, 1e-4),
            ("both NaN errors", nan_eager, nan_eager + 1e-2, exact.masked_fill(nan_eager.isnan(), math.nan), 1e-4),
            ("fp64 not float64", eager, noisy(1e-2), exact.float(), 1e-4)]


@pytest.mark.parametrize("name", [c[0] for c in _cases()])
def test_the_chunked_fp64_rule_is_torch_s_same_and_eager_s_error_settles_it_alone(name, monkeypatch):
    from harness.engine import accuracy
    _, eager, compiled, fp64, tol = next(c for c in _cases() if c[0] == name)
    expected = torch._dynamo.utils.same(eager, compiled, fp64, tol=tol, equal_nan=True, log_error=lambda *a: None)
    monkeypatch.setattr(accuracy, "CHUNK", 333)   # chunks that do not divide the tensors
    found, eager_error = as_close_as_eager(eager, compiled, fp64, tol)
    assert found == expected
    # from eager's error alone, the bound is either undecided or the same verdict
    distance = math.sqrt(float(((eager.double() - compiled.double()) ** 2).mean()))
    assert bounded(distance, eager_error, accuracy._multiplier(eager, tol), tol) in (None, expected)


def test_a_large_fp64_reference_is_run_once_per_call_and_later_configs_are_judged_from_eager_s_error(monkeypatch):
    from harness.engine import scenarios
    monkeypatch.setattr(scenarios, "HOLD_BYTES", 0)   # nothing held: fp64 outputs too
    torch.manual_seed(0)
    refs = References("M", Built(_Mixer().eval(), {"x": torch.randn(3, 4)}), "cpu", Accuracy())
    eager = scenarios.run(refs.eager, refs.inputs)["logits"]
    verdicts = [refs.judge(None, {"logits": eager + shift}) for shift in (0.5, 0.5, 0.25, 1e-5)]
    assert refs.fp64_runs == 1   # the first config's; the others are settled by eager's kept error
    assert [v.accuracy for v in verdicts] == ["wrong", "wrong", "wrong", "close"] and verdicts[0] == verdicts[1]


def test_a_failed_fp64_reference_is_not_run_again_and_leaves_the_call_not_judged():
    class Float32Only(_Mixer):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            if x.dtype != torch.float32:
                raise TypeError("float32 only")
            return super().forward(x)
    refs = References("M", Built(Float32Only().eval(), {"x": torch.randn(3, 4)}), "cpu", Accuracy())
    found = [refs.judge(None, {"logits": refs.first["logits"] + 0.5}) for _config in range(2)]
    assert refs.fp64_runs == 1 and found[0] == found[1]
    assert found[0].accuracy == "not_judged" and "fp64 reference failed: TypeError: float32 only" in found[0].detail


def test_the_weight_step_is_drawn_once_taken_alike_by_every_copy_and_undone_bitwise_from_the_other_copy():
    torch.manual_seed(0)
    module = _Mixer().eval()
    twin = copy.deepcopy(module)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    change, taken = weights_moved(module, twin), []
    for target in (module, twin, module):
        wide = copy.deepcopy(module).double()       # as the fp64 run's: made for the one run, never restored
        with change(target), change(wide):
            taken.append({n: p.detach() - before[n] for n, p in target.named_parameters()})
            for n, p in wide.named_parameters():   # the fp64 copy's step: the same draw, cast before scaling
                assert torch.allclose(p.detach() - before[n].double(), taken[-1][n].double(), atol=1e-7)
        for copied in (module, twin):               # each restored from the other, no saved copy
            assert all(torch.equal(p, before[n]) for n, p in copied.named_parameters())
    assert all(torch.equal(taken[0][n], t[n]) and 0 < t[n].abs().max() < 0.1 for t in taken[1:] for n in before)
    with change(module), pytest.raises(RuntimeError, match="both cannot be moved at once"):
        with change(twin):
            pass


def test_after_the_first_wrong_output_no_value_is_compared_but_metadata_still_is_listed():
    x = torch.randn(4, 6)
    asked = []
    verdict = compare({"n": 3, "h": x}, {"n": 4, "h": (x + 1).t().contiguous().t()}, **TOL,
                      fp64=Fp64(lambda: asked.append(1) or {"n": 3, "h": x.double()}))
    assert (verdict.accuracy, verdict.output, verdict.detail) == ("wrong", "n", "3 in eager, 4 compiled")
    assert asked == [] and verdict.metadata == ["h: strides (6, 1) in eager, (1, 4) compiled"]


def test_bitwise_counts_nans_in_the_same_places_and_signed_zeros_equal():
    nan = torch.tensor([1.0, float("nan"), -0.0])
    assert bitwise(nan, nan.clone()) and bitwise(nan, torch.tensor([1.0, float("nan"), 0.0]))
    assert not bitwise(nan, torch.tensor([1.0, 2.0, 0.0])) and not bitwise(nan, nan.double())


def test_outputs_too_large_to_hold_are_made_again_and_judged_as_the_held_ones(monkeypatch):
    from harness.engine import accuracy, scenarios

    def judged(refs: References) -> list:
        hook = next(s for s in refs.steps if s.scenario == "hook_added")
        eager = {"logits": scenarios.run(refs.eager, refs.inputs)["logits"]}
        hooked = {"logits": refs._reference(hook)["logits"]}
        return [refs.judge(None, eager), refs.judge(None, {"logits": eager["logits"] + 1e-5}),
                refs.judge(None, {"logits": eager["logits"] + 0.5}), refs.judge(hook, hooked)]

    torch.manual_seed(0)
    model, inputs = _Mixer().eval(), {"x": torch.randn(64, 4)}
    held = judged(References("M", Built(copy.deepcopy(model), inputs), "cpu", Accuracy()))
    monkeypatch.setattr(scenarios, "HOLD_BYTES", 0)     # nothing held: every eager output made again when judged
    monkeypatch.setattr(accuracy, "CHUNK", 7)           # and compared 7 values at a time
    refs = References("M", Built(copy.deepcopy(model), inputs), "cpu", Accuracy())
    assert refs.first is None and refs.outputs == {} and refs.made_again == {"hook_added", "weights_updated"}
    assert judged(refs) == held and [v.accuracy for v in held] == ["exact", "close", "wrong", "exact"]


class _Pooled(_Mixer):
    """Each row's output sees the whole batch (its mean): a row run alone is not the batched output's row."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = super().forward(x)["logits"]
        return {"logits": logits - logits.mean(0, keepdim=True)}


@pytest.mark.parametrize("cls", [_Mixer, _Pooled])
def test_a_large_outputs_fp64_arbitration_per_batch_row_equals_the_whole_outputs(monkeypatch, cls):
    from harness.engine import scenarios

    torch.manual_seed(0)
    model, inputs, tight = cls().eval(), {"x": torch.randn(6, 4)}, Accuracy(rtol=1e-9, atol=1e-9)

    def judged(refs: References) -> list:
        eager = scenarios.run(refs.eager, refs.inputs)["logits"]
        nearer = scenarios.run(scenarios.double_copy(refs.eager), scenarios.to_fp64(refs.inputs))["logits"].float()
        hook = next(s for s in refs.steps if s.scenario == "hook_added")
        return [refs.judge(None, {"logits": nearer}), refs.judge(None, {"logits": eager + 1e-4}),
                refs.judge(hook, {"logits": refs._reference(hook)["logits"] + 1e-4})]

    whole = judged(References("M", Built(copy.deepcopy(model), inputs), "cpu", tight))
    assert [v.accuracy for v in whole] == ["close", "wrong", "wrong"] and "as close to fp64" in whole[0].detail
    monkeypatch.setattr(scenarios, "HOLD_BYTES", 0)     # every output large: arbitrated per batch row
    refs = References("M", Built(copy.deepcopy(model), inputs), "cpu", tight)
    if cls is _Mixer:   # no whole fp64 output is ever made
        monkeypatch.setattr(refs, "_fp64_run", lambda step: pytest.fail("the whole fp64 output was made"))
    assert judged(refs) == whole
    assert all(torch.equal(p, q) for p, q in zip(refs.eager.parameters(), model.parameters()))   # step undone
