"""Provider layer: adapter protocol, registry and the built-in ``openai``/``anthropic``/``ollama``/``openai_responses`` adapters."""

from agent_core.providers.base import ProviderAdapter, ProviderFactory
from agent_core.providers.registry import ProviderRegistry

__all__ = ["ProviderAdapter", "ProviderFactory", "ProviderRegistry"]
