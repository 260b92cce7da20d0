"""One interface for every model step; backends differ only in how they answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from benchcurate.curation.models.identity import OFFLINE_LABEL
from benchcurate.curation.models.prompting import Prompt
from benchcurate.schemas import Generation, ImageRef

Reply = TypeVar("Reply", bound=BaseModel)

__all__ = ["OFFLINE_LABEL", "ChatTurn", "ModelBackend", "ModelRequest", "ModelResult", "generation_for"]


@dataclass(frozen=True)
class ChatTurn:
    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class ModelRequest:
    prompt: Prompt
    variables: dict[str, str]
    images: tuple[ImageRef, ...]
    seed: int
    model: str | None = None  # a stage's own model; None means the backend's
    # earlier turns of a conversation, sent before the rendered prompt; the images go with the first user turn
    history: tuple[ChatTurn, ...] = ()
    # for a free-text prompt (TextReply): reads the reply, raising ValueError when it is not in the asked format
    # (the model is then asked once more, told why); its result is ModelResult.parsed
    parse: Callable[[str], Any] | None = None


@dataclass(frozen=True)
class ModelResult(Generic[Reply]):
    value: Reply
    generation: Generation
    raw: str | None = None
    parsed: Any = None


class ModelBackend(Protocol):
    label: str
    model: str
    concurrency: int  # requests the runner may have in flight at once

    def identity(self) -> dict[str, str]:
        """What makes this backend's answers what they are (no secrets); part of every model stage's key."""
        ...

    def check(self) -> None:
        """Fail before any item is touched: UserError for a bad key or model, BackendUnavailable when unreachable."""
        ...

    def complete(self, request: ModelRequest) -> ModelResult:
        """Answer with an instance of `request.prompt.output_schema`, or raise ModelOutputInvalid."""
        ...


def generation_for(backend: ModelBackend, prompt: Prompt, model: str | None = None) -> Generation:
    return Generation(
        backend=backend.label,
        model=model or backend.model,
        prompt_id=prompt.id,
        prompt_version=prompt.version,
        prompt_sha256=prompt.sha256,
    )
