"""Packaged prompt, template and built-in agent assets, addressed by ``asset_id`` (contract.md §12).

The data files live next to this module (``prompts/``, ``templates/``, ``agents/``); see
:mod:`agent_core._assets.loader` for the loading rules and the output contracts the prompts define.
"""

from agent_core._assets.loader import (
    ASSET_PATHS,
    BUILTIN_AGENT_ASSETS,
    CONFIG_TEMPLATE_ID,
    PLAN_TEMPLATE_PREFIX,
    STATIC_SYSTEM_ASSETS,
    STATIC_SYSTEM_BLOCKS,
    TASK_TEMPLATE_ID,
    Asset,
    AssetLoader,
    StaticBlockSpec,
    asset_version,
)

__all__ = [
    "ASSET_PATHS",
    "BUILTIN_AGENT_ASSETS",
    "CONFIG_TEMPLATE_ID",
    "PLAN_TEMPLATE_PREFIX",
    "STATIC_SYSTEM_ASSETS",
    "STATIC_SYSTEM_BLOCKS",
    "TASK_TEMPLATE_ID",
    "Asset",
    "AssetLoader",
    "StaticBlockSpec",
    "asset_version",
]
