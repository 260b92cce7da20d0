"""Model backends behind one interface: `offline` (default, heuristics) and `openai` (any OpenAI-protocol URL)."""

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.models.base import OFFLINE_LABEL, ModelBackend, ModelRequest, ModelResult
from benchcurate.curation.models.pricing import Budget
from benchcurate.schemas import BackendSpec


def make_backend(spec: BackendSpec, cache: Cache | None = None, budget: Budget | None = None) -> ModelBackend:
    """The backend the spec names; a paid backend runs only when asked for, never because a key is set."""
    if spec.kind == "offline":
        from benchcurate.curation.models.offline import OfflineBackend

        return OfflineBackend(cache)
    from benchcurate.curation.models.openai_backend import OpenAIBackend

    return OpenAIBackend(spec, cache=cache, budget=budget)


__all__ = ["OFFLINE_LABEL", "ModelBackend", "ModelRequest", "ModelResult", "make_backend"]
