"""The structured-output schema we send in strict mode: the same transform as the openai SDK's, and accepted by an
API that enforces strict mode's rules (the loopback server refuses what the real API refuses, worded alike)."""

from __future__ import annotations

import copy
from enum import Enum
from typing import Literal

import openai
import pytest
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, ConfigDict, Field

from benchcurate.curation.models.openai_backend import strict_schema

from ..factories import reply_models
from ..fakes.openai_server import FakeOpenAIServer
from ..servers import starts_server


class Mood(str, Enum):
    calm = "calm"
    tense = "tense"


class Spot(BaseModel):
    x: int = Field(ge=0)
    y: int = Field(ge=0)


class Region(BaseModel):
    model_config = ConfigDict(json_schema_extra={"allOf": [{"description": "a labelled area"}]})
    label: str
    corners: list[Spot] = Field(min_length=2, description="clockwise from the top left")


class Outline(BaseModel):
    name: str
    children: list[Outline] = Field(default_factory=list)


class Described(BaseModel):
    """Every shape pydantic writes that strict mode treats specially."""

    focus: Spot = Field(description="where the eye lands")  # $ref with a sibling keyword
    backup: Spot | None = None  # nullable union, default null
    regions: list[Region]  # $ref inside items; a one-entry allOf
    mood: Mood = Field(description="overall tone")  # enum definition with a sibling keyword
    kind: Literal["photo", "chart"] = "photo"  # non-null default kept
    outline: Outline | None = Field(default=None, description="tree")  # recursive definition


CRAFTED = [Spot, Region, Outline, Described]


@pytest.mark.parametrize("model", [*reply_models(), *CRAFTED], ids=lambda model: model.__name__)
def test_the_transform_equals_the_sdks(model):
    assert strict_schema(model) == to_strict_json_schema(model)


def test_the_transform_changes_what_strict_mode_needs_and_leaves_the_model_schema_alone():
    before = copy.deepcopy(Described.model_json_schema())
    schema = strict_schema(Described)
    assert Described.model_json_schema() == before
    focus = schema["properties"]["focus"]
    assert "$ref" not in focus and focus["description"] == "where the eye lands" and focus["required"] == ["x", "y"]
    assert schema["required"] == list(schema["properties"]) and "default" not in schema["properties"]["backup"]
    assert schema["properties"]["kind"]["default"] == "photo"
    region = schema["$defs"]["Region"]
    assert "allOf" not in region and region["description"] == "a labelled area"
    assert region["additionalProperties"] is False and region["required"] == ["label", "corners"]


@pytest.fixture(scope="module")
@starts_server
def api():
    with (
        FakeOpenAIServer() as server,
        openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client,
    ):
        yield client


def ask(client: openai.OpenAI, name: str, schema: dict):
    return client.chat.completions.create(
        model="fake-vlm",
        messages=[{"role": "user", "content": "Describe it."}],
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}},
    )


@pytest.mark.parametrize("model", [*reply_models(), *CRAFTED[:3]], ids=lambda model: model.__name__)
def test_a_strict_api_accepts_every_reply_schema_and_its_reply_validates(api, model):
    reply = ask(api, model.__name__, strict_schema(model))
    model.model_validate_json(reply.choices[0].message.content)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (
            {
                **strict_schema(Spot),
                "$defs": {"Spot": strict_schema(Spot)},
                "properties": {"x": {"$ref": "#/$defs/Spot", "description": "where"}, "y": {"type": "integer"}},
            },
            "Invalid schema for response_format 'Check': context=('properties', 'x'), $ref cannot have keywords "
            "{'description'}.",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            "Invalid schema for response_format 'Check': In context=(), 'additionalProperties' is required to be "
            "supplied and to be false.",
        ),
        (
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["a"],
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            },
            "Invalid schema for response_format 'Check': In context=(), 'required' is required to be supplied and to be "
            "an array including every key in properties. Missing 'b'.",
        ),
        (
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["items"],
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"v": {"type": "number"}}, "required": ["v"]},
                    }
                },
            },
            "Invalid schema for response_format 'Check': In context=('properties', 'items', 'items'), "
            "'additionalProperties' is required to be supplied and to be false.",
        ),
        (
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 1}},
            },
            "Invalid schema for response_format 'Check': In context=('properties', 'name'), 'minLength' is not permitted.",
        ),
        (
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["a"],
                "properties": {"a": {"allOf": [{"type": "string"}, {"type": "string"}]}},
            },
            "Invalid schema for response_format 'Check': In context=('properties', 'a'), 'allOf' is not permitted.",
        ),
    ],
)
def test_a_strict_api_refuses_what_strict_mode_forbids(api, schema, says):
    with pytest.raises(openai.BadRequestError) as refused:
        ask(api, "Check", schema)
    assert refused.value.body["message"] == says and refused.value.body["param"] == "response_format"
