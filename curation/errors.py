"""The kinds of failure (and of waiting) the pipeline distinguishes."""


class UserError(Exception):
    """A user mistake (bad recipe, missing folder, bad parameter): one line that says what to do, no traceback."""


class BackendUnavailable(Exception):
    """A model server that cannot be reached or refuses the credentials: the stage fails and a rerun resumes it."""


class StageFailed(Exception):
    """A stage whose every item failed: nothing is recorded as done, so a rerun tries again after the fix."""


class StageWaiting(Exception):
    """Work outside this process is still running (batches, people reviewing): the stage is not done, and a rerun
    with the same run id resumes it."""


class ModelRequestRejected(Exception):
    """The server refused this request (HTTP 4xx other than auth and rate limits): the item is dropped."""


class ModelOutputInvalid(Exception):
    """A reply that does not match its schema: the item becomes a recorded drop with the raw reply kept."""

    def __init__(self, message: str, raw: str | None = None):
        super().__init__(message)
        self.raw = raw
