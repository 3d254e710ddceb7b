"""The scenario reference: every key of the scenario models says what it is, and the shipped
docs/scenario-reference.md and scenarios/scenario.schema.json are what the models generate."""

import inspect
import json
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from transitsim.cli import main
from transitsim.scenario import Scenario, scenario_json_schema
from transitsim.scenario.schema import scenario_reference_markdown

REPO = Path(__file__).resolve().parents[1]
REGENERATE = "regenerate: transitsim scenario-reference -o docs/scenario-reference.md"


def scenario_models() -> list[type[BaseModel]]:
    """Every pydantic model a scenario file reaches from its top level."""
    found: list[type[BaseModel]] = []

    def walk(annotation: object) -> None:
        if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
            if annotation not in found:
                found.append(annotation)
                for field in annotation.model_fields.values():
                    walk(field.annotation)
            return
        for argument in typing.get_args(annotation):
            walk(argument)

    walk(Scenario)
    return found


def test_the_walk_finds_the_nested_models() -> None:
    names = {model.__name__ for model in scenario_models()}
    assert {"Scenario", "NetworkModel", "LinkModel", "TransformModel", "VerdictModel"} <= names
    assert "HostModel" in names  # the network's host: block (issue 25)
    assert {"NcclModel", "ProtocolModel"} <= names  # the network's nccl: block (issue 24)
    assert len(names) == 21


@pytest.mark.parametrize("model", scenario_models(), ids=lambda m: m.__name__)
def test_every_key_says_what_it_is(model: type[BaseModel]) -> None:
    missing = [name for name, field in model.model_fields.items() if not field.description]
    assert not missing, f"{model.__name__}: Field(description=...) for {', '.join(missing)}"


def test_every_key_is_described_in_the_schema_too() -> None:
    schema = scenario_json_schema()
    for name, model in [("Scenario", schema), *schema["$defs"].items()]:
        for key, prop in model["properties"].items():
            assert prop.get("description"), f"{name}.{key} has no description in the schema"


def test_the_committed_reference_is_the_generated_one() -> None:
    committed = (REPO / "docs" / "scenario-reference.md").read_text(encoding="utf-8")
    assert committed == scenario_reference_markdown(), REGENERATE


def test_the_committed_schema_is_the_generated_one() -> None:
    committed = (REPO / "scenarios" / "scenario.schema.json").read_text(encoding="utf-8")
    generated = json.dumps(scenario_json_schema(), indent=2, sort_keys=False) + "\n"
    assert committed == generated, "regenerate: transitsim scenario-schema -o scenarios/..."


def test_the_reference_has_a_row_per_key_with_its_units_and_default() -> None:
    text = scenario_reference_markdown()
    for model in scenario_models():
        heading = "## Scenario" if model is Scenario else f"## {model.__name__}"
        assert f"{heading}\n" in text
        section = text.split(f"{heading}\n", 1)[1].split("\n## ", 1)[0]
        for name, field in model.model_fields.items():
            key = field.alias or name  # the key a file writes (`from`, not `from_`)
            assert f"| `{key}` |" in section, f"{model.__name__}.{key}"
    rate = "| `rate` | a rate: b/s, B/s, bps, with k M G T P, e.g. `200 Gb/s` | required |"
    assert rate in text
    assert "| `tie_margin` | number (>= 0, < 1) | `0.01` |" in text
    assert "| `topology` | " in text and "required unless `preset`" in text


def test_the_command_prints_and_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["scenario-reference"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == scenario_reference_markdown()
    target = tmp_path / "ref.md"
    with pytest.raises(SystemExit) as exited:
        main(["scenario-reference", "-o", str(target), "-q"])
    assert exited.value.code == 0 and target.read_text() == scenario_reference_markdown()
    with pytest.raises(SystemExit) as exited:
        main(["scenario-reference", "-o", str(tmp_path)])  # a folder: one line, exit 2
    assert exited.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
