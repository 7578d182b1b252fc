"""The tracking issue a maintainer reads in one screen: its size, the error shown once, the observations.

The error is a real one (tests/fixtures/tracking_error_qwen2vl.json: Qwen2-VL under
capture_dynamic_output_shape_ops, as a sweep stored it); the runs around it are made by hand.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from bot.issues.context import PlanSettings
from bot.issues.plan import plan
from bot.issues.timeline import Timeline
from harness.core import error_parts
from harness.core.outcome import Outcome
from harness.core.signature import signature
from state.verdicts import Component, RunVerdict, Verdict
from tests import issueviews as iv

FIXTURES = Path(__file__).parent / "fixtures"
REAL = json.loads((FIXTURES / "tracking_error_qwen2vl.json").read_text())
DYNAMO = json.loads((FIXTURES / "dynamo_errors.json").read_text())["messages"]
DCO, CSO = "capture_dynamic_output_shape_ops", "capture_scalar_outputs"
CONFIGS = {DCO: {f"torch._dynamo.config.{DCO}": True}, CSO: {f"torch._dynamo.config.{CSO}": True}}
VL = [f"Vl{i}ForConditionalGeneration" for i in range(8)]
LLM = [f"Llm{i}ForCausalLM" for i in range(4)]
MESSAGE, TRACEBACK = REAL["outcome"]["error_message"], REAL["outcome"]["traceback"]
SIG = REAL["outcome"]["signature"]
OTHER_SIG = "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN} not in returned outputs"


def ok(model: str, config: str, stratum: str, graphs: int = 25) -> Outcome:
    return Outcome(model=model, config=config, status="ok", stratum=stratum, graphs=graphs)


def real_crash(model: str, config: str, stratum: str = "vl_multimodal", n: int = 0) -> Outcome:
    """The real error, its symbol renumbered per model (as it is across models: one signature)."""
    message, tb = (re.sub(r"\bu0\b", f"u{n}", t) for t in (MESSAGE, TRACEBACK))
    return Outcome(model=model, config=config, status="error", stratum=stratum, graphs=4,
                   error_type=REAL["outcome"]["error_type"], error_message=message, traceback=tb,
                   torch_frame=REAL["outcome"]["torch_frame"], signature=signature("GuardOnDataDependentSymNode", message),
                   attempts=3)                                     # confirmed by flake re-runs


def other_crash(model: str, config: str, stratum: str) -> Outcome:
    return Outcome(model=model, config=config, status="error", stratum=stratum, error_type="PendingUnbackedSymbolNotFound",
                   error_message="Pending unbacked symbols {u3} not in returned outputs", signature=OTHER_SIG,
                   attempts=3)


def quick_start(*, cso_crashes: int = 6, dco_llm_crash: bool = False, helped: int = 2) -> list[Outcome]:
    """The quick start's shape: 8 VL models crash under DCO, `cso_crashes` of them also under CSO; 4 LLMs."""
    outs = []
    for i, m in enumerate(VL):
        outs += [ok(m, "baseline", "vl_multimodal"), real_crash(m, DCO, n=i),
                 other_crash(m, CSO, "vl_multimodal") if i < cso_crashes else ok(m, CSO, "vl_multimodal")]
    for i, m in enumerate(LLM):
        dco = other_crash(m, DCO, "decoder_llm") if dco_llm_crash and i == 0 else \
            ok(m, DCO, "decoder_llm", 20 if i < helped else 25)
        outs += [ok(m, "baseline", "decoder_llm"), dco, ok(m, CSO, "decoder_llm")]
    return outs


def script(lines: int) -> str:
    """A reproducer of the length the maintainer's script is held to (bot/verify: at most 60 lines)."""
    head = ["import torch", "import transformers", "", "torch.manual_seed(0)"]
    return "\n".join(head + [f"x{i} = torch.randn(2, {i + 1})  # input {i}" for i in range(lines - len(head))]) + "\n"


def tracking_body(outs: list[Outcome], config: str = DCO, sig: str = SIG, verdicts=()) -> str:
    view = iv.view(outs, configs=CONFIGS | {"baseline": {}}, environment=REAL["environment"],
                   options={"backend": "count"}, verdicts=verdicts)
    return next(a.body for a in plan(view, Timeline(), PlanSettings(min_models=1)).actions
                if a.kind == "tracking" and a.config == config and a.signature == sig)


def section(body: str, heading: str) -> str:
    return body.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_quick_start_issue_fits_in_15_kb_and_shows_the_dynamo_message_once() -> None:
    verdict = Verdict(DCO, SIG, VL[0], fingerprint="fp", build_version="2.13.0", build_git="abc", status="confirmed",
                      script=script(60), torch_version="2.13.0+cpu")
    component = Component("dynamo", "count", by_construction=True)
    body = tracking_body(quick_start(), verdicts=[RunVerdict(DCO, SIG, verdict, component)])
    assert MESSAGE.count("line 403, in <listcomp>") == 2           # the real message lists the user frames twice
    assert len(body.encode()) <= 15_000, len(body.encode())
    assert body.count("line 403, in <listcomp>") == 1 and "User Stack" not in body and "from user code" not in body
    headings = re.findall(r"^## (.+)$", body, re.M)
    assert headings == ["Summary", "Error", "Affected models", "Observations", "Reproducer", "Component",
                        "Environment", "History"]
    error = section(body, "Error")
    # The exception line follows the user frames in one block; the innermost torch frame and the signature name it.
    assert "(query_states, key_states, value_states)\nGuardOnDataDependentSymNode: Could not guard" in error
    assert f"Signature: `{SIG}`" in error
    # Each affected model's row says where in its own code it fails (the error is the same: one signature).
    assert section(body, "Affected models").count("modeling\\_qwen2\\_vl.py:403 in &lt;listcomp&gt; |") == 8
    # Dynamo's advice and the traceback are folded, the traceback bounded but keeping both ends.
    assert error.count("<details>") == 2 and "TORCHDYNAMO_EXTENDED_DEBUG_CREATE_SYMBOL" in error
    assert 'File "harness/engine/backend.py"' in error and "in _evaluate_expr" in error and "frames) left out" in error
    assert not re.search(r"^\s*\^+\s*$", body, re.M)                # no column markers anywhere
    assert "PyTorch version: 2.13.0+cpu\nPyTorch git: cf30153c" in section(body, "Environment")
    assert "/work/" not in body and "python:" not in body.lower()


def test_the_single_model_quick_start_issue_from_the_real_run_is_small() -> None:
    outs = [ok("Qwen2VLForConditionalGeneration", "baseline", "vl_multimodal"),
            real_crash("Qwen2VLForConditionalGeneration", DCO)]
    body = tracking_body(outs)
    assert len(body.encode()) <= 10_000 and body.count("line 403, in <listcomp>") == 1
    # One model shows no pattern: no stratum, overlap or "one signature" sentence; the ratio is always there.
    assert section(body, "Observations").strip() == (
        "- Crash : benefit 1 : 0: the flag crashes 1 model and gives no model fewer graphs.")


def test_observations_appear_when_the_data_supports_them() -> None:
    obs = section(tracking_body(quick_start()), "Observations")
    assert ("- All 8 affected models are `vl_multimodal`: 8 of the 8 testable `vl_multimodal` models crash, "
            "0 of the 4 testable models of the other strata.") in obs
    assert "- Crash : benefit 8 : 2: the flag crashes 8 models and gives 2 models fewer graphs." in obs
    assert "- 6 of 8 also crash under `capture_scalar_outputs=True`, with another signature." in obs
    assert "- One signature across all 8 models: every crash of the flag is this one." in obs


def test_observations_are_left_out_when_the_data_does_not_support_them() -> None:
    obs = section(tracking_body(quick_start(cso_crashes=0, dco_llm_crash=True, helped=0)), "Observations")
    assert "also crash under" not in obs and "One signature across" not in obs
    assert "- One of 2 crash signatures of the flag: 8 of its 9 crashing models." in obs
    assert "- Crash : benefit 9 : 0: the flag crashes 9 models and gives no model fewer graphs." in obs
    # Strata mixed below three quarters: no stratum sentence.
    mixed = quick_start()[:9] + [ok(m, c, "decoder_llm") if c == "baseline" else real_crash(m, c, "decoder_llm", 9)
                                 if c == DCO else ok(m, c, "decoder_llm") for m in LLM for c in ("baseline", DCO, CSO)]
    obs = section(tracking_body(mixed), "Observations")
    assert "affected models are" not in obs and "One signature across all 7 models" in obs


def test_the_user_frames_are_kept_once_from_the_longest_stack() -> None:
    parts = error_parts.split("GuardOnDataDependentSymNode", MESSAGE)
    assert [f"{f.line} {f.function}" for f in parts.frames] == [
        "695 torch_dynamo_resume_in_forward_at_688", "121 forward_with_checkpointing", "444 forward", "402 forward",
        "403 <listcomp>"]
    assert parts.head == ("GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 0) "
                          "(unhinted: Eq(u0, 0)).  (Size-like symbols: u0)")
    assert "User Stack" not in parts.advice and 'File "' not in parts.advice and "Caused by:" in parts.advice
    # A snipped "User Stack" (fewer frames) and a complete "from user code": the complete one, each frame once.
    snipped = ("Boom\n\nUser Stack (most recent call last):\n  (snipped, see stack below for prefix)\n"
               '  File "m.py", line 9, in g\n    y()\n    ^^^\n\nfrom user code:\n'
               '   File "m.py", line 2, in f\n    g()\n  File "m.py", line 9, in g\n    y()\n')
    parts = error_parts.split("RuntimeError", snipped)
    assert parts.frames_text == 'File "m.py", line 2, in f\n    g()\nFile "m.py", line 9, in g\n    y()'
    assert parts.head == "RuntimeError: Boom" and parts.advice == ""


def test_a_graph_break_keeps_its_explanation_and_a_wrapped_error_its_inner_line() -> None:
    gb = DYNAMO["branch"]
    parts = error_parts.split(gb["type"], gb["message"])
    assert parts.head == "Unsupported: Data-dependent branching"
    assert parts.explanation.startswith("Detected data-dependent branching") and "Hint:" not in parts.explanation
    assert "Hint: For the common pattern" in parts.advice and "Developer debug context" in parts.advice
    bcf = DYNAMO["bcf"]
    assert error_parts.headline(bcf["type"], bcf["message"]) == (
        "BackendCompilerFailed: backend='bcf' raised: RuntimeError: boom at 0x7f00deadbeef")


def test_a_traceback_excerpt_is_bounded_and_keeps_both_ends() -> None:
    short = error_parts.traceback_excerpt(TRACEBACK, 100_000)
    assert "^^^" not in short and short.count("\n") < TRACEBACK.count("\n")
    assert short.rstrip().endswith("Could not guard on data-dependent expression Eq(u0, 0) (unhinted: Eq(u0, 0)).  "
                                   "(Size-like symbols: u0)")   # the message's first line, not its advice again
    cut = error_parts.traceback_excerpt(TRACEBACK, 2000)
    assert len(cut) <= 2000 and cut.startswith("Traceback (most recent call last):")
    assert "in _evaluate_expr" in cut and re.search(r"… \d+ lines \(\d+ frames\) left out …", cut)
    chained = ("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'x'\n"
               "second line of the message\n\nThe above exception was the direct cause of the following exception:\n\n"
               "Traceback (most recent call last):\n  File \"b.py\", line 2, in h\n    f()\nRuntimeError: wrapped\nmore\n")
    assert error_parts.traceback_excerpt(chained) == (
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'x'\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n  File \"b.py\", line 2, in h\n    f()\nRuntimeError: wrapped")
