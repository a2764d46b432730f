"""An unknown ``plan.template_name`` is a ``config_error`` that names the config file and the key
(docs/configuration.md; issue 13)."""

from __future__ import annotations

import pytest

from agent_core import AgentRuntime
from agent_core.errors import AgentCoreError, ErrorCode
from tests.fixtures.env import SoongEnv


async def test_unknown_plan_template_names_the_config_file_and_key(soong_env: SoongEnv) -> None:
    path = soong_env.write_config(plan={"template_name": "fancy"})
    with pytest.raises(AgentCoreError) as info:
        async with AgentRuntime(project_dir=soong_env.project):
            pass
    error = info.value
    assert error.code == ErrorCode.config_error
    assert str(path) in str(error)
    assert "plan.template_name" in str(error)
    assert "'fancy'" in str(error)
    assert error.details["config_path"] == str(path)
    assert error.details["key"] == "plan.template_name"
