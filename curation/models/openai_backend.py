"""OpenAI-protocol backend (OpenAI, vLLM, Ollama, any compatible base URL) over the official `openai` client.

Structured outputs: every call sends the prompt's pydantic schema as a strict JSON-schema response format.
A reply that does not validate is asked for once more with the validation error; a second failure raises
ModelOutputInvalid with the raw reply, which the runner records as a drop. The API key is read from
OPENAI_API_KEY here and nowhere else; it never enters configs, run files or logs.
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import openai
from pydantic import BaseModel, ValidationError

from curation.errors import BackendUnavailable, ModelOutputInvalid, ModelRequestRejected, UserError
from curation.images.decode import decode_image
from curation.models.base import ModelRequest, ModelResult, generation_for
from curation.models.identity import OPENAI_DEFAULT_BASE_URL, backend_identity, resolved_base_url
from schemas import BackendSpec, ImageRef

KEYLESS_PLACEHOLDER = "not-needed"  # local servers (vLLM, Ollama) accept any key


def strict_schema(model: type[BaseModel]) -> dict:
    """The model's JSON schema with every property required and no extra keys, as strict mode expects."""

    def tighten(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
            for value in node.values():
                tighten(value)
        elif isinstance(node, list):
            for value in node:
                tighten(value)

    schema = model.model_json_schema()
    tighten(schema)
    return schema


def image_data_url(image: ImageRef, max_side_px: int) -> str:
    """The image as a JPEG data URL, downscaled so its longest side is at most `max_side_px`."""
    picture = decode_image(Path(image.path)).image
    picture.thumbnail((max_side_px, max_side_px))
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


class OpenAIBackend:
    label = "openai"

    def __init__(self, spec: BackendSpec, api_key: str | None = None):
        if not spec.model:
            raise UserError("the openai backend needs a model name: pass --model NAME (or set backend.model "
                            "in the recipe)")
        self.spec = spec
        self.model = spec.model
        self.base_url = resolved_base_url(spec)
        self.concurrency = spec.concurrency
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url == OPENAI_DEFAULT_BASE_URL:
            raise UserError("--backend openai against api.openai.com needs OPENAI_API_KEY in the environment "
                            "(or use --backend offline, the default)")
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key or KEYLESS_PLACEHOLDER,
                                     timeout=spec.timeout_seconds, max_retries=spec.max_retries)

    def identity(self) -> dict[str, str]:
        return backend_identity(self.spec)

    def check(self) -> None:
        try:
            known = [entry.id for entry in self._client.models.list()]
        except openai.AuthenticationError as error:
            raise UserError(f"the server at {self.base_url} rejected the API key (HTTP 401); "
                            f"check OPENAI_API_KEY") from error
        except (openai.APIConnectionError, openai.APITimeoutError) as error:
            raise BackendUnavailable(f"cannot reach the model server at {self.base_url}: start it or fix "
                                     f"--base-url, then rerun with the same --run-id to resume") from error
        except openai.NotFoundError:
            return  # some compatible servers do not list models; the first call will tell
        if known and self.model not in known:
            raise UserError(f"model '{self.model}' is not served at {self.base_url} (it serves: "
                            f"{', '.join(sorted(known)[:10])}); pass --model with one of them")

    def _messages(self, request: ModelRequest) -> list[dict]:
        rendered = request.prompt.render(request.variables)
        content: list[dict] = [{"type": "text", "text": rendered.user}]
        content += [{"type": "image_url", "image_url": {"url": image_data_url(image, self.spec.image_max_side_px)}}
                    for image in request.images]
        return [{"role": "system", "content": rendered.system}, {"role": "user", "content": content}]

    def _call(self, messages: list[dict], request: ModelRequest) -> str:
        schema_model = request.prompt.output_schema
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, temperature=0, seed=request.seed % (2**31),
                response_format={"type": "json_schema", "json_schema": {
                    "name": schema_model.__name__, "schema": strict_schema(schema_model), "strict": True}})
        except (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError,
                openai.RateLimitError) as error:
            raise BackendUnavailable(f"model server at {self.base_url} failed after {self.spec.max_retries} "
                                     f"retries ({type(error).__name__}); rerun with the same --run-id to resume"
                                     ) from error
        except openai.AuthenticationError as error:
            raise UserError(f"the server at {self.base_url} rejected the API key; check OPENAI_API_KEY") from error
        except openai.APIStatusError as error:  # 400, 403, 404, 422: this request, not the server
            raise ModelRequestRejected(f"HTTP {error.status_code} from {self.base_url}: {error.message}") from error
        return response.choices[0].message.content or ""

    def complete(self, request: ModelRequest) -> ModelResult:
        messages = self._messages(request)
        raw = self._call(messages, request)
        try:
            value = request.prompt.output_schema.model_validate_json(raw)
        except ValidationError as first_error:
            retry = messages + [{"role": "assistant", "content": raw}, {"role": "user", "content": (
                "That reply does not match the required JSON schema:\n"
                f"{first_error.errors(include_url=False)}\nReply again with only valid JSON.")}]
            raw = self._call(retry, request)
            try:
                value = request.prompt.output_schema.model_validate_json(raw)
            except ValidationError as error:
                raise ModelOutputInvalid(f"reply did not match {request.prompt.output_schema.__name__} "
                                         f"twice: {error.error_count()} errors", raw=raw) from error
        return ModelResult(value=value, generation=generation_for(self, request.prompt), raw=raw)
