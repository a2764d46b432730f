"""User skills: the ``${SOONG_AGENT_HOME}/skills/*.md`` catalog and the ``internal.load_skill`` tool."""

from agent_core._skills.catalog import SkillCatalog, SkillEntry, SkillIssue
from agent_core._skills.tool import LOAD_SKILL_TOOL, SkillToolAdapter

__all__ = ["LOAD_SKILL_TOOL", "SkillCatalog", "SkillEntry", "SkillIssue", "SkillToolAdapter"]
