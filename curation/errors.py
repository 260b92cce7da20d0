"""The kinds of failure (and of waiting) the pipeline distinguishes."""

import errno
import sqlite3


class UserError(Exception):
    """A user mistake (bad recipe, missing folder, bad parameter): one line that says what to do, no traceback."""


class BackendUnavailable(Exception):
    """A model server that cannot be reached or refuses the credentials: the stage fails and a rerun resumes it."""


class BudgetExceeded(Exception):
    """The next call would take spending past --max-cost: the stage stops, everything finished is kept. (Defined
    here, with the other errors the `curate` command catches, so the command need not import the model layer.)"""


class StageFailed(Exception):
    """A stage whose every item failed: nothing is recorded as done, so a rerun tries again after the fix."""


class StageWaiting(Exception):
    """Work outside this process is still running (batches, people reviewing): the stage is not done, and a rerun
    with the same run id resumes it."""


class DiskFull(Exception):
    """No space left where a run or a release writes: nothing half-written is kept as done, and the same command,
    once there is space, resumes."""


def disk_full(error: BaseException) -> bool:
    """Whether an error means the disk (or the user's quota) is full, however the layer below put it."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(error, sqlite3.OperationalError) and "disk is full" in str(error)


class Interrupted(Exception):
    """Ctrl-C: the process stopped sending model requests; a call that would have sent one ends with this."""


class ModelRequestRejected(Exception):
    """The server refused this request (HTTP 4xx other than auth and rate limits): the item is dropped."""


class ModelReplyTooLarge(Exception):
    """A reply over the backend's size limit (a misbehaving server): the item is dropped, nothing is stored."""


class ModelOutputInvalid(Exception):
    """A reply that does not match its schema: the item becomes a recorded drop with the raw reply kept."""

    def __init__(self, message: str, raw: str | None = None):
        super().__init__(message)
        self.raw = raw
