"""The pure comment-command parser: lines, quotes and code, edits, every command, bad input; the commands' stored
forms read back strictly."""
import json

import pytest

from bot.commands import handlers
from bot.commands.handlers import Answered
from harness.core.record import RecordError
from bot.commands.parse import Command, Problem, command_lines, help_entries, new_command_lines, parse_comment, parse_line

H = "@flagsweep-bot"


def test_one_command_per_line_and_only_lines_starting_with_the_handle():
    body = f"Thanks!\n{H} status\nplease {H} rerun\n{H} rerun\n{H}x help\n"
    assert command_lines(body, H) == [f"{H} status", f"{H} rerun"]


def test_handle_is_case_insensitive_and_allows_a_colon():
    assert [c.name for c in parse_comment(f"@FlagSweep-Bot: help", H)] == ["help"]


def test_quoted_lines_fenced_blocks_and_inline_code_are_ignored():
    body = "\n".join([
        f"> {H} rerun",
        "```",
        f"{H} mute",
        "```",
        "~~~~ text",
        f"{H} unmute",
        "~~~~",
        f"`{H} sweep --config a --models b`",
        f"{H} status",
    ])
    cmds = parse_comment(body, H)
    assert [c.name for c in cmds] == ["status"]


def test_unclosed_fence_hides_the_rest():
    assert parse_comment(f"```\n{H} rerun\n", H) == []


def test_edited_comment_runs_only_new_lines():
    before = f"{H} rerun\nsome text"
    after = f"{H} rerun\nsome text, fixed\n{H} status"
    assert new_command_lines(after, before, H) == [f"{H} status"]
    assert [c.name for c in parse_comment(after, H, previous=before)] == ["status"]
    assert parse_comment(before, H, previous=before) == []


def test_sweep_arguments():
    c = parse_line(f"{H} sweep --config capture_scalar_outputs --models 'Qwen*' "
                   f"--base-setting torch._dynamo.config.cache_size_limit=16", H)
    assert isinstance(c, Command) and c.privileged
    assert c.args == {"config": "capture_scalar_outputs", "models": ["Qwen*"],
                      "base_setting": ["torch._dynamo.config.cache_size_limit=16"], "modes": None}
    assert Command.from_dict(c.to_dict()) == c
    m = parse_line(f"{H} sweep --config a --models B --modes train-bf16,dynamic-true", H)
    assert m.args["modes"] == ["train-bf16", "dynamic-true"]


def test_cc_normalizes_handles_and_bisect_dates():
    c = parse_line(f"{H} cc add @alice bob-smith", H)
    assert c.args == {"action": "add", "handles": ["@alice", "@bob-smith"]}
    b = parse_line(f"{H} bisect --config capture_scalar_outputs --model GPT2Model --good 2026-11-01 --bad 2026-11-20", H)
    assert b.name == "bisect" and b.args["good"] == "2026-11-01" and b.args["bad"] == "2026-11-20"


def test_unknown_command_and_unknown_flag_are_problems_not_exits():
    p = parse_line(f"{H} deploy", H)
    assert isinstance(p, Problem) and "invalid choice" in p.message and "COMMAND" in p.usage
    p = parse_line(f"{H} rerun --now", H)
    assert isinstance(p, Problem) and "unrecognized arguments: --now" in p.message
    p = parse_line(f"{H} sweep --conf x --models y", H)   # no abbreviations
    assert isinstance(p, Problem) and "sweep" in p.usage
    p = parse_line(f"{H} help --help", H)
    assert isinstance(p, Problem)


def test_hostile_arguments_are_refused_by_the_parser():
    for line in [f"{H} sweep --config '$(rm -rf /)' --models x",
                 f"{H} sweep --config a --models 'x; curl evil'",
                 f"{H} sweep --config a --models x --base-setting 'os.system=1;'",
                 f"{H} sweep --config a --models x --base-setting noequals",
                 f"{H} cc add @-bad-",
                 f"{H} bisect --config a --model M --good yesterday",
                 f"{H} bisect --config a --model M --good 2026-11-20 --bad 2026-11-01",
                 f"{H} sweep --config a --models x --modes 'train;rm -rf /'",
                 f"{H} sweep --config a --models x --modes ,",
                 f"{H} sweep --config 'a b' --models \"unterminated"]:
        p = parse_line(line, H)
        assert isinstance(p, Problem), line
        assert p.usage.startswith("usage:")


def test_empty_command():
    assert isinstance(parse_line(H, H), Problem)


def test_help_is_generated_from_the_parser():
    entries = {e["name"]: e for e in help_entries(H)}
    assert set(entries) == {"help", "status", "rerun", "sweep", "mute", "unmute", "cc", "bisect", "wrong-culprit"}
    assert "--config CONFIG" in entries["sweep"]["usage"] and "--base-setting K=V" in entries["sweep"]["usage"]
    assert "\n" not in entries["bisect"]["usage"]
    assert entries["rerun"]["privileged"] and not entries["status"]["privileged"]


def test_a_stored_command_with_an_unknown_field_names_it():
    with pytest.raises(RecordError, match="command: unknown field 'argz'"):
        Command.from_dict({"name": "sweep", "argz": {}})


def test_an_interrupted_jobs_answers_read_back_as_written():
    done = [Answered("@flagsweep-bot help", "answered", "help"), Answered("@flagsweep-bot frob", "bad command")]
    stored = json.loads(json.dumps({"commands": [a.to_dict() for a in done]}))
    assert stored["commands"][1] == {"line": "@flagsweep-bot frob", "outcome": "bad command"}
    assert handlers._answered(stored) == done
    with pytest.raises(RecordError, match="command job result entry: unknown field 'outcom'"):
        handlers._answered({"commands": [{"line": "x", "outcom": "answered"}]})
    with pytest.raises(RecordError, match="command job result: unknown field 'paused'"):
        handlers._answered({"commands": [], "paused": 3})


def test_commas_in_models_split_as_the_command_line_splits_them():
    """Issue 31: `--models A,B` is two globs (as `flagsweep sweep --models A,B`), not one name with a comma."""
    c = parse_line(f"{H} sweep --config a --models 'Qwen*, GPT2Model,'", H)
    assert isinstance(c, Command) and c.args["models"] == ["Qwen*", "GPT2Model"]
    for bad in ("','", "'A,$(x)'"):
        p = parse_line(f"{H} sweep --config a --models {bad}", H)
        assert isinstance(p, Problem) and "not a valid model glob" in p.message, bad
