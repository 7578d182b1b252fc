"""The shared test fixtures keep no global state between tests (pytest runs a file's tests in order)."""
from harness import zoo
from harness.zoo import registry

PROBE = "FixtureLeakProbeModel"


def test_a_registered_model_is_visible_during_its_test(register_model):
    register_model(PROBE, "decoder_llm", lambda device: None)
    assert PROBE in registry.EXTRA and zoo.resolve([PROBE])[0].model == PROBE


def test_and_gone_after_it():
    assert PROBE not in registry.EXTRA
