"""Reading responses by duck typing: ``field`` answers as ``getattr`` would, whatever the object."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from agenttrace import semconv as sc
from agenttrace.tracing.llm_attributes import field, usage_attributes

_ABSENT = object()


class Usage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int | None = None
    _cost: float = pydantic.PrivateAttr(default=0.5)

    @property
    def total(self) -> int:
        return self.prompt_tokens + (self.completion_tokens or 0)


class Lenient(Usage):
    """A model that answers every missing attribute itself (as some SDK objects do)."""

    def __getattr__(self, name: str) -> Any:
        return f"lenient {name}" if not name.startswith("__") else super().__getattr__(name)


def _getattr(obj: Any, name: str) -> Any:
    value = getattr(obj, name, _ABSENT)
    return None if value is _ABSENT else value


@pytest.mark.parametrize(
    "name",
    ["prompt_tokens", "completion_tokens", "cache_read_input_tokens", "total", "_cost", "json"],
)
@pytest.mark.parametrize("model", [Usage, Lenient])
def test_a_model_reads_as_getattr_reads_it(model: type[Usage], name: str) -> None:
    usage = model(prompt_tokens=3, cache_read_input_tokens=2)  # an extra field
    expected = _getattr(usage, name)
    got = field(usage, name)
    assert got == expected or (callable(got) and callable(expected))


def test_an_absent_field_is_none_and_an_extra_one_is_read() -> None:
    assert field(Usage(prompt_tokens=1), "cache_creation_input_tokens") is None
    assert field(Usage(prompt_tokens=1, reasoning_tokens=4), "reasoning_tokens") == 4
    assert field(Lenient(prompt_tokens=1), "anything") == "lenient anything"


def test_usage_of_a_model_with_cache_tokens_beside_it() -> None:
    usage = Usage(prompt_tokens=10, completion_tokens=2, cache_read_input_tokens=4)
    assert usage_attributes(usage) == {
        sc.GEN_AI_USAGE_INPUT_TOKENS: 10,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: 2,
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 4,
    }


def test_dicts_and_plain_objects() -> None:
    class Plain:
        role = "assistant"

    assert field({"role": "user"}, "role") == "user"
    assert field(Plain(), "role") == "assistant"
    assert field(Plain(), "content") is None
    assert field(None, "role") is None
