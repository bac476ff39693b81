"""The one rule for what content goes to each output (agenttrace._internal.capture)."""

from __future__ import annotations

import pytest

from agenttrace._internal.capture import Output, captures, content_attributes
from agenttrace._internal.config import Settings

OPT_IN = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


def where(env: dict[str, str], **overrides: object) -> set[Output]:
    settings = Settings.resolve(env, **overrides)
    return {output for output in Output if captures(output, settings)}


SAVED = {Output.OPTREE, Output.STREAM}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, SAVED),
        ({"AGENTTRACE_CAPTURE_CONTENT": "1"}, SAVED | {Output.SPAN, Output.SPAN_EVENT}),
        (
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
            SAVED | {Output.SPAN, Output.SPAN_EVENT},
        ),
        ({**OPT_IN, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"}, SAVED),
        (
            {**OPT_IN, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
            SAVED | {Output.SPAN, Output.SPAN_EVENT},
        ),
        (
            {**OPT_IN, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
            SAVED | {Output.LOG},
        ),
        (
            {**OPT_IN, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"},
            SAVED | {Output.SPAN, Output.SPAN_EVENT, Output.LOG},
        ),
        # agenttrace's own setting wins over the conventions' variable
        (
            {
                "AGENTTRACE_CAPTURE_CONTENT": "0",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            },
            SAVED,
        ),
        ({"AGENTTRACE_CONSOLE": "trace"}, SAVED | {Output.CONSOLE}),
        ({"AGENTTRACE_CONSOLE": "verbose"}, SAVED),
    ],
)
def test_each_output_follows_the_settings(env: dict[str, str], expected: set[Output]) -> None:
    assert where(env) == expected


def test_init_arguments_win_over_the_environment() -> None:
    assert Output.SPAN in where({}, capture_content=True)
    assert Output.SPAN not in where({"AGENTTRACE_CAPTURE_CONTENT": "1"}, capture_content=False)


def test_content_attributes_are_all_or_nothing() -> None:
    contents = {"gen_ai.input.messages": "[]", "gen_ai.output.messages": "[]"}
    on = Settings.resolve({}, capture_content=True)
    off = Settings.resolve({})
    assert content_attributes(Output.SPAN, contents, on) == contents
    assert content_attributes(Output.SPAN, contents, on) is not contents
    assert content_attributes(Output.SPAN, contents, off) == {}
    assert content_attributes(Output.OPTREE, contents, off) == contents
