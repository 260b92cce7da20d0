"""The kinds of failure (and of waiting) the pipeline distinguishes."""

import errno
import sqlite3
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from benchcurate.curation.core.secrets import redact

Model = TypeVar("Model", bound=BaseModel)


class RedactedError(Exception):
    """An error whose message never holds a secret (see curation/secrets.py): it is printed, logged and stored."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(redact(str(message)), *args)


class UnexpectedError(RedactedError):
    """Another library's exception where its text would be stored (a Prefect state, a log): the same text redacted,
    the original kept as its cause."""

    @classmethod
    def of(cls, error: BaseException) -> "UnexpectedError":
        return cls(f"{type(error).__name__}: {error}")


class UserError(RedactedError):
    """A user mistake (bad recipe, missing folder, bad parameter): one line that says what to do, no traceback."""


def one_line(error: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """Every mistake of a validation error as `where: what`, on one line. `where` is the name the caller shows for
    the field (`names` maps a field path such as `candidate.base_url`, or its owner `candidate`, to it: a flag on
    the command line), else the field's dotted path; a mistake of the whole model is `what` alone."""
    shown = names or {}
    lines = []
    for entry in error.errors(include_url=False):
        where = tuple(str(part) for part in entry["loc"])
        owners = (".".join(where[:size]) for size in range(len(where), 0, -1))
        name = next((shown[owner] for owner in owners if owner in shown), ".".join(where))
        text = entry["msg"].removeprefix("Value error, ")
        lines.append(f"{name}: {text[:1].lower()}{text[1:]}" if name else text)
    return "; ".join(lines)


def validated(model: type[Model], fields: Mapping[str, Any], names: Mapping[str, str] | None = None) -> Model:
    """`model` (RunOptions, EvalOptions, ...) from `fields`, a mistake becoming a one-line UserError naming each
    field as `one_line` does: by the caller's names (flags, for the command line), else by its path."""
    try:
        return model.model_validate(fields)
    except ValidationError as error:
        raise UserError(one_line(error, names)) from error


class BackendUnavailable(RedactedError):
    """A model server that cannot be reached or refuses the credentials: the stage fails and a rerun resumes it."""


class BudgetExceeded(RedactedError):
    """The next call would take spending past --max-cost: the stage stops, everything finished is kept. (Defined
    here, with the other errors the `curate` command catches, so the command need not import the model layer.)"""


class StageFailed(RedactedError):
    """A stage whose every item failed: nothing is recorded as done, so a rerun tries again after the fix."""


class StageWaiting(RedactedError):
    """Work outside this process is still running (batches, people reviewing): the stage is not done, and a rerun
    with the same run id resumes it."""


class DiskFull(RedactedError):
    """No space left where a run or a release writes: nothing half-written is kept as done, and the same command,
    once there is space, resumes."""


def disk_full(error: BaseException) -> bool:
    """Whether an error means the disk (or the user's quota) is full, however the layer below put it."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(error, sqlite3.OperationalError) and "disk is full" in str(error)


class Interrupted(RedactedError):
    """Ctrl-C: the process stopped sending model requests; a call that would have sent one ends with this."""


class ModelRequestRejected(RedactedError):
    """The server refused this request (HTTP 4xx other than auth and rate limits): the item is dropped."""


class ModelReplyTooLarge(RedactedError):
    """A reply over the backend's size limit (a misbehaving server): the item is dropped, nothing is stored."""


class ModelOutputInvalid(RedactedError):
    """A reply that does not match its schema: the item becomes a recorded drop with the raw reply kept."""

    def __init__(self, message: str, raw: str | None = None):
        super().__init__(message)
        self.raw = None if raw is None else redact(raw)
