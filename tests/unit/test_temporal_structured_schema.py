"""The output schema of a temporal run as a worker rebuilds it from the run row (engine/temporal/_structured)."""

from __future__ import annotations

from pydantic import BaseModel

from agent_core._loop._output import OutputSchema
from agent_core.engine.temporal._structured import output_schema_of


class Size(BaseModel):
    n: int


def meta_of(schema: OutputSchema, model: str | None) -> dict[str, object]:
    return {"output_schema": {"name": schema.name, "json_schema": schema.json_schema, "model": model}}


def test_an_importable_pydantic_class_is_the_workers_schema() -> None:
    rebuilt = output_schema_of(meta_of(OutputSchema(Size), f"{__name__}:Size"))
    assert rebuilt is not None and rebuilt.model is Size
    assert rebuilt.validate({"n": 3}) == (Size(n=3), [])


def test_without_the_class_the_worker_validates_against_its_json_schema() -> None:
    rebuilt = output_schema_of(meta_of(OutputSchema(Size), "not_a_module_here:Size"))
    assert rebuilt is not None and rebuilt.model is None and rebuilt.name == "Size"
    assert rebuilt.validate({"n": 3}) == ({"n": 3}, [])
    value, errors = rebuilt.validate({"n": "three"})
    assert value is None and errors and errors[0]["path"].startswith("$")


def test_a_run_without_an_output_schema() -> None:
    assert output_schema_of({"mode": "normal"}) is None
