"""A stand-in torch build for tests/test_every_flag.py: `allow_rnn` matters here without being read through the
config module (a wrapped torch.compile looks at the entry it kept at start-up), so read-set pruning misses it and
the audit must catch it. It also declares one config key that the real build lacks."""
import torch
import torch._dynamo.config as _dynamo_config
from torch.utils._config_module import _ConfigEntry, _Config

_ENTRY = dict.__getitem__(_dynamo_config.__dict__["_config"], "allow_rnn")
dict.__setitem__(_dynamo_config.__dict__["_config"], "standin_only_flag", _ConfigEntry(_Config(default=False), "standin_only_flag"))
_compile = torch.compile


def compile(model=None, *args, **kwargs):
    if _ENTRY.user_override.get() is True:
        raise RuntimeError("stand-in build: allow_rnn changes this compile")
    return _compile(model, *args, **kwargs)


torch.compile = compile
