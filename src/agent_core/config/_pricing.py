"""What model usage costs: the ``price_*_per_mtok`` keys of ``[model]`` and its profiles, as a pure policy.

:class:`Prices` holds one model's prices (USD per million tokens), :func:`cost_usd` prices a :class:`Usage`
(each part of the input at its own price) and :func:`configured_prices` finds the prices of a
provider/model pair among the models the configuration names (``[model]`` and every
``[model_overrides.<name>]``), for readers that price a stored model call after the fact (``serve``'s
trace). The run loop prices every call with the same two functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_core.config._profiles import ProfileError, resolve_model
from agent_core.config.model import ResolvedModelConfig
from agent_core.types.model import Usage

if TYPE_CHECKING:
    from agent_core.config.loader import LoadedConfig


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens: ``[model] price_input_per_mtok`` / ``price_output_per_mtok`` and the prompt
    cache's ``price_cache_read_per_mtok`` / ``price_cache_write_per_mtok`` (see :meth:`for_model`)."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    cache_read_per_mtok: float | None = None
    """``None``: cache reads cost the input price."""
    cache_write_per_mtok: float | None = None
    """``None``: cache writes cost the input price."""

    @property
    def priced(self) -> bool:
        return self.input_per_mtok is not None or self.output_per_mtok is not None

    @classmethod
    def for_model(cls, model: ResolvedModelConfig) -> Prices:
        """The model's prices. Unset cache prices follow the provider's rule: Anthropic bills a cache read at
        0.1x and a write at 1.25x the input price (2x for one-hour entries); other providers are assumed
        to bill cached input like input (an upper bound: set the cache read price to be exact)."""
        read, write = model.price_cache_read_per_mtok, model.price_cache_write_per_mtok
        base = model.price_input_per_mtok
        if base is not None and model.provider == "anthropic":
            if read is None:
                read = base * 0.1
            if write is None:
                write = base * (2.0 if model.prompt_cache_ttl == "1h" else 1.25)
        return cls(model.price_input_per_mtok, model.price_output_per_mtok, read, write)


def cost_usd(usage: Usage, prices: Prices) -> float | None:
    """The USD cost of ``usage``, each part of the input at its own price (uncached input, cache reads,
    cache writes); ``None`` when no price is configured."""
    if not prices.priced:
        return None
    base = prices.input_per_mtok or 0.0
    read = base if prices.cache_read_per_mtok is None else prices.cache_read_per_mtok
    write = base if prices.cache_write_per_mtok is None else prices.cache_write_per_mtok
    return (
        usage.uncached_input_tokens * base
        + (usage.cache_read_tokens or 0) * read
        + (usage.cache_write_tokens or 0) * write
        + usage.output_tokens * (prices.output_per_mtok or 0.0)
    ) / 1_000_000


def configured_prices(config: LoadedConfig) -> dict[tuple[str, str], Prices]:
    """``(provider, model name) -> Prices`` of ``[model]`` and every ``[model_overrides.<name>]`` that sets
    a price (the first one naming a pair wins, ``[model]`` first). A model an agent definition names
    inline is not in it: its calls stay unpriced here (the run's own usage record still has its cost)."""
    found: dict[tuple[str, str], Prices] = {}
    candidates: list[str | None] = [None, *config.settings.model_overrides]
    for profile in candidates:
        try:
            model = resolve_model(config, purpose="main", profile=profile)
        except ProfileError:
            continue
        prices = Prices.for_model(model)
        if prices.priced:
            found.setdefault((model.provider, model.name), prices)
    return found
