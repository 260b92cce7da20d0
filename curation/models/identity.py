"""What identifies a backend's answers, computed from its spec alone (no client, no key, no network)."""

from benchcurate.schemas import BackendSpec

OFFLINE_LABEL = "offline-heuristic"
HEURISTICS_VERSION = "heuristics-v2"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolved_base_url(spec: BackendSpec) -> str:
    return (spec.base_url or OPENAI_DEFAULT_BASE_URL).rstrip("/")


def backend_identity(spec: BackendSpec) -> dict[str, str]:
    if spec.kind == "offline":
        return {"backend": OFFLINE_LABEL, "model": HEURISTICS_VERSION}
    identity = {"backend": "openai", "model": spec.model or "", "base_url": resolved_base_url(spec),
                "image_max_side_px": str(spec.image_max_side_px), "temperature": str(spec.temperature),
                "max_output_tokens": str(spec.max_output_tokens), "image_transport": spec.image_transport}
    if spec.refresh_token:  # --refresh-cache: new answers, so new stage outputs
        identity["refresh_token"] = spec.refresh_token
    return identity
