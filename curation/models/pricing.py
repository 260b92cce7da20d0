"""Token prices, the cost of a call, and the budget that stops a run before it spends more than allowed."""

from __future__ import annotations

import threading
from functools import cache
from importlib import resources

import yaml

from benchcurate.curation.core.errors import BudgetExceeded, UserError  # BudgetExceeded: raised here, defined there
from benchcurate.schemas import BackendSpec, Price

CHARS_PER_TOKEN = 4  # for estimates before sending; replies report the real counts
IMAGE_TOKENS_PER_512_TILE = 170
IMAGE_BASE_TOKENS = 85


@cache
def _table() -> dict:
    return yaml.safe_load((resources.files("benchcurate.curation.models") / "prices.yaml").read_text(encoding="utf-8"))


def price_for(spec: BackendSpec) -> Price | None:
    """The model's price: the run's own table first, then the built-in one; None when unknown."""
    if spec.model in spec.prices:
        return spec.prices[spec.model]
    known = _table()["models"].get(spec.model)
    return None if known is None else Price(**known)


def batch_discount() -> float:
    return float(_table()["batch_discount"])


def cost_usd(price: Price | None, input_tokens: int, output_tokens: int, batch: bool = False) -> float | None:
    if price is None:
        return None
    cost = (input_tokens * price.input_per_million + output_tokens * price.output_per_million) / 1_000_000
    return cost * (batch_discount() if batch else 1.0)


def estimate_input_tokens(texts: list[str], image_sides: list[tuple[int, int]]) -> int:
    """A generous estimate before sending: characters / 4, plus the provider's tile rule for each image."""
    tokens = sum(len(text) for text in texts) // CHARS_PER_TOKEN + 1
    for width, height in image_sides:
        tiles = -(-width // 512) * -(-height // 512)
        tokens += IMAGE_BASE_TOKENS + IMAGE_TOKENS_PER_512_TILE * tiles
    return tokens


class Budget:
    """Spending of new (uncached) calls in this process, with reservations for calls in flight."""

    def __init__(self, max_cost_usd: float | None):
        self.max_cost_usd = max_cost_usd
        self.spent = 0.0
        self.reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, estimate: float) -> None:
        with self._lock:
            if self.max_cost_usd is not None and self.spent + self.reserved + estimate > self.max_cost_usd:
                raise BudgetExceeded(
                    f"the next model call (up to ${estimate:.4f}) would take spending past "
                    f"--max-cost ${self.max_cost_usd:.2f} (spent ${self.spent:.4f}, reserved for "
                    f"calls in flight ${self.reserved:.4f}); everything finished is kept and "
                    f"cached: rerun with a higher --max-cost to go on"
                )
            self.reserved += estimate

    def settle(self, estimate: float, actual: float) -> None:
        with self._lock:
            self.reserved -= estimate
            self.spent += max(0.0, actual)


def counted_tokens(reported_input: int, reported_output: int, estimated_input: int, max_output: int) -> tuple[int, int]:
    """The tokens a call is charged at: what the server reported, but never a negative count (invalid: the
    worst case is taken) and never fewer input tokens than our own estimate of the request, so a server that
    reports nothing, or less than nothing, cannot talk a budget into more calls."""
    input_tokens = max(reported_input, estimated_input) if reported_input >= 0 else estimated_input
    output_tokens = reported_output if reported_output >= 0 else max_output
    return input_tokens, output_tokens


def check_budget_settings(spec: BackendSpec) -> None:
    if spec.max_cost_usd is not None and spec.kind == "openai" and price_for(spec) is None:
        raise UserError(
            f"--max-cost needs a price for model '{spec.model}': pass --price {spec.model}=IN,OUT (USD per "
            f"million input and output tokens) or add it under backend.prices in the recipe"
        )


def parse_prices(entries: list[str]) -> dict[str, Price]:
    """`--price MODEL=IN,OUT` flags (USD per million input and output tokens) as {model: Price}."""
    prices = {}
    for entry in entries:
        model, sep, pair = entry.rpartition("=")
        parts = pair.split(",")
        try:
            if not sep or not model or len(parts) != 2:
                raise ValueError(entry)
            prices[model] = Price(input_per_million=float(parts[0]), output_per_million=float(parts[1]))
        except ValueError:
            raise UserError(
                f"--price expects MODEL=IN,OUT in USD per million input and output tokens, e.g. "
                f"--price gpt-4o=2.5,10; got '{entry}'"
            ) from None
    return prices
