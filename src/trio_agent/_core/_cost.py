"""What replies cost in USD, from the ``genai-prices`` price table (the ``cost`` extra).

The table is the maintained one of pydantic's ``genai-prices`` package: prices per model
and provider, with cache reads and writes priced as such. A model or provider the table
does not know gives None — never a guess — and so does a missing ``genai-prices``. A
reply that reported no tokens costs 0.

Our provider names map onto the table's: ``openai`` and ``openai-responses`` are OpenAI,
``anthropic`` Anthropic, ``gemini`` Google; another name is looked up as it is (a local
server's, like ``llama.cpp``, is not in the table: None); an empty one lets the table
find the provider from the model name alone.
"""

from __future__ import annotations

from typing import Protocol


class Counts(Protocol):
    """The token counts a price is computed from (a ``Usage``)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def total(self) -> int: ...


__all__ = ["PROVIDER_IDS", "Counts", "price"]

PROVIDER_IDS = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
}
"""Our provider names → the price table's provider ids."""


def price(usage: Counts, model: str, provider: str = "") -> float | None:
    """The price in USD of ``usage`` on ``model`` served by ``provider``; None when
    the table does not know them or ``genai-prices`` is not installed. Pure (the table
    is the installed package's snapshot: no network)."""
    if usage.total == 0:
        return 0.0
    if not model:
        return None
    try:
        import genai_prices
    except ImportError:
        return None
    tokens = genai_prices.Usage(
        # The table's input counts cached tokens too, and prices them apart.
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    try:
        calculation = genai_prices.calc_price(
            tokens, model, provider_id=PROVIDER_IDS.get(provider, provider) or None
        )
    except LookupError:
        return None
    return float(calculation.total_price)
