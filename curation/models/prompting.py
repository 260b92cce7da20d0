"""Load versioned prompt templates from `prompts/<purpose>/v<N>.yaml` and render them strictly.

Templates use `${name}` placeholders; a placeholder without a value is an error, never an empty string.
The file's sha256 goes into every decision, the request-cache key and the release manifest.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel

from benchcurate.curation.core.errors import UserError
from benchcurate.schemas import replies


@dataclass(frozen=True)
class RenderedPrompt:
    system: str
    user: str


@dataclass(frozen=True)
class Prompt:
    id: str
    version: int
    sha256: str
    system: str
    user: str
    output_schema: type[BaseModel]
    source: str
    example_inputs: dict[str, str]
    # named passages the caller picks one of (e.g. a judge's rules per task), versioned with the prompt
    parts: dict[str, str] = field(default_factory=dict)

    @property
    def variables(self) -> set[str]:
        names = set()
        for text in (self.system, self.user):
            for _, named, braced, _ in string.Template.pattern.findall(text):
                names.add(named or braced)
        return names - {""}

    def render(self, variables: dict[str, str]) -> RenderedPrompt:
        missing = self.variables - set(variables)
        if missing:
            raise ValueError(f"prompt {self.id} v{self.version} needs values for {sorted(missing)}")
        return RenderedPrompt(
            string.Template(self.system).substitute(variables), string.Template(self.user).substitute(variables)
        )


def available_versions(prompt_id: str) -> list[int]:
    folder = resources.files("benchcurate.prompts") / prompt_id
    if not folder.is_dir():
        return []
    return sorted(
        int(entry.name[1:-5])
        for entry in folder.iterdir()
        if entry.name.startswith("v") and entry.name.endswith(".yaml")
    )


@cache
def load_prompt(prompt_id: str, version: int) -> Prompt:
    path = resources.files("benchcurate.prompts") / prompt_id / f"v{version}.yaml"
    if not path.is_file():
        known = available_versions(prompt_id)
        raise UserError(
            f"no prompt '{prompt_id}' version {version} (available: {known or 'none'}); "
            f"pin an existing version in the recipe"
        )
    raw = path.read_bytes()
    data = yaml.safe_load(raw)
    schema = getattr(replies, data["output_schema"], None)
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ValueError(f"prompt {prompt_id} v{version} names unknown output_schema {data['output_schema']!r}")
    if data["id"] != prompt_id or data["version"] != version:
        raise ValueError(f"prompt file {prompt_id}/v{version}.yaml declares id={data['id']} version={data['version']}")
    return Prompt(
        id=prompt_id,
        version=version,
        sha256=hashlib.sha256(raw).hexdigest(),
        system=data["system"],
        user=data["user"],
        output_schema=schema,
        source=data["source"],
        example_inputs=dict(data.get("example_inputs") or {}),
        parts=dict(data.get("parts") or {}),
    )
