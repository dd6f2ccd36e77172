"""Tool calls parsed out of the text a small local model writes."""

from __future__ import annotations

import pytest

from co_cli.local.toolcalls import ParsedCall, could_be_tool_call_prefix, parse_tool_calls, streamable_length

TOOLS = {"get_weather", "read_file"}


def test_tagged_call() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert parse_tool_calls(text, TOOLS) == ("", [ParsedCall("get_weather", {"city": "Paris"})])


def test_tagged_call_without_closing_tag() -> None:
    text = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}'
    assert parse_tool_calls(text, TOOLS) == ("", [ParsedCall("read_file", {"path": "a.txt"})])


def test_several_tagged_calls_keep_their_order() -> None:
    text = (
        '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    leftover, calls = parse_tool_calls(text, TOOLS)
    assert leftover == ""
    assert calls == [ParsedCall("read_file", {"path": "a"}), ParsedCall("get_weather", {"city": "Oslo"})]


def test_text_around_the_call_is_kept() -> None:
    text = (
        'Let me check the weather.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}'
        "</tool_call>\nOne moment."
    )
    leftover, calls = parse_tool_calls(text, TOOLS)
    assert calls == [ParsedCall("get_weather", {"city": "Rome"})]
    assert leftover == "Let me check the weather.\n\nOne moment."


def test_fenced_json_call() -> None:
    text = 'Sure.\n```json\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n```'
    assert parse_tool_calls(text, TOOLS) == ("Sure.", [ParsedCall("get_weather", {"city": "Lima"})])


def test_fenced_call_without_language() -> None:
    text = '```\n{"name": "read_file", "arguments": {"path": "x"}}\n```'
    assert parse_tool_calls(text, TOOLS) == ("", [ParsedCall("read_file", {"path": "x"})])


def test_bare_json_call() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Kyiv"}}'
    assert parse_tool_calls(text, TOOLS) == ("", [ParsedCall("get_weather", {"city": "Kyiv"})])


def test_parameters_alias_and_arguments_as_json_string() -> None:
    aliased = '{"name": "get_weather", "parameters": {"city": "Bern"}}'
    as_string = '{"name": "get_weather", "arguments": "{\\"city\\": \\"Bern\\"}"}'
    assert parse_tool_calls(aliased, TOOLS)[1] == [ParsedCall("get_weather", {"city": "Bern"})]
    assert parse_tool_calls(as_string, TOOLS)[1] == [ParsedCall("get_weather", {"city": "Bern"})]


def test_openai_style_function_wrapper_and_missing_arguments() -> None:
    text = '<tool_call>{"type": "function", "function": {"name": "read_file"}}</tool_call>'
    assert parse_tool_calls(text, TOOLS) == ("", [ParsedCall("read_file", {})])


def test_list_of_calls_in_one_block() -> None:
    text = '[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "read_file", "arguments": {"path": "b"}}]'
    leftover, calls = parse_tool_calls(text, TOOLS)
    assert leftover == ""
    assert [call.arguments["path"] for call in calls] == ["a", "b"]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"</tool_call>',
        '```json\n{"name": "get_weather", "arguments": {city: Paris}}\n```',
        '{"name": "get_weather", "arguments": {"city": "Paris"}',
        '{"name": "get_weather", "arguments": "not json"}',
        '{"name": "get_weather", "arguments": [1, 2]}',
    ],
)
def test_malformed_json_stays_text(text: str) -> None:
    assert parse_tool_calls(text, TOOLS) == (text, [])


def test_unknown_tool_name_stays_text() -> None:
    text = '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>'
    assert parse_tool_calls(text, TOOLS) == (text, [])


def test_json_that_is_not_a_call_stays_text() -> None:
    text = 'Here is the config:\n{"city": "Paris", "units": "metric"}'
    assert parse_tool_calls(text, TOOLS) == (text, [])


def test_a_call_nested_in_other_json_stays_text() -> None:
    text = '{"example": {"name": "get_weather", "arguments": {"city": "Paris"}}}'
    assert parse_tool_calls(text, TOOLS) == (text, [])


def test_no_tools_means_no_calls() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    assert parse_tool_calls(text, set()) == (text, [])


@pytest.mark.parametrize(
    "text",
    ["", "  \n", "<", "<tool", "<tool_call>", '<tool_call>{"name": "get_wea', "`", "``", "```", "```js", "```json\n",
     '```json\n{"na', "{", '{"', '{"name": "get_weather", "argu', "[", "[{", '  {"name"'],
)  # fmt: skip
def test_text_that_may_become_a_call_is_held(text: str) -> None:
    assert could_be_tool_call_prefix(text)


@pytest.mark.parametrize(
    "text",
    ["Hello", "The answer is 42.", "<b>bold</b>", "<toolbox>", "```python\nprint(1)", "```\nls -la\n```",
     "{x}", "{ not json", '{"city": "Paris"}', "[1, 2, 3]", "[link](http://x)"],
)  # fmt: skip
def test_prose_is_not_held(text: str) -> None:
    assert not could_be_tool_call_prefix(text)


def test_streamable_length_holds_back_from_where_a_call_may_start() -> None:
    assert streamable_length("Plain prose streams at once.") == len("Plain prose streams at once.")
    text = "Let me look that up.\n<tool_c"
    assert streamable_length(text) == text.index("<tool_c")
    fenced = "Sure:\n```json\n{"
    assert streamable_length(fenced) == fenced.index("```")
    assert streamable_length('{"name": "get_weather"') == 0


def test_braces_and_tags_inside_a_line_do_not_hold_the_stream() -> None:
    text = "Use a dict like {a: 1} or a <b> tag."
    assert streamable_length(text) == len(text)
