"""Scenario value types: quantities with units, targets, and the strict base model.

Units are parsed here, once (`transitsim.base.units`); below this layer everything is SI floats.
Each type runs its parser inside pydantic so the message lands at the right key, and is
documented as a string in the JSON Schema.
"""

import math
import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

from transitsim.base.errors import TransitsimError
from transitsim.base.units import (
    parse_bytes,
    parse_flop_rate,
    parse_frequency_hz,
    parse_length_m,
    parse_rate_bps,
    parse_time_s,
    show_value,
)


def _via(parser: typing.Callable[[object], Any]) -> BeforeValidator:
    """Run a units parser inside pydantic, so its message lands at the right key."""

    def validate(value: object) -> Any:
        try:
            return parser(value)
        except TransitsimError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(validate)


# What each kind of quantity accepts, by the example its schema shows (a field's own
# description replaces the type's in the JSON Schema; the scenario reference prints both).
UNIT_HINTS: dict[str, str] = {}


def _unit_schema(example: str, description: str) -> WithJsonSchema:
    UNIT_HINTS[example] = description
    return WithJsonSchema(
        {"type": "string", "description": description, "examples": [example]}, mode="validation"
    )


Rate = Annotated[
    float, _via(parse_rate_bps), _unit_schema("200 Gb/s", "a rate: b/s, B/s, bps, with k M G T P")
]
Duration = Annotated[
    float, _via(parse_time_s), _unit_schema("5 ms", "a duration: s, ms, us, ns, min, h")
]
Length = Annotated[float, _via(parse_length_m), _unit_schema("1000 km", "a length: m, km")]
Frequency = Annotated[
    float, _via(parse_frequency_hz), _unit_schema("1 GHz", "a frequency: Hz, kHz, MHz, GHz, /s")
]
FlopRate = Annotated[
    float, _via(parse_flop_rate), _unit_schema("989 TFLOP/s", "a compute rate: FLOP/s, FLOPS")
]
_SIZE_HINT = "a size in bytes: B, kB, MB, GB, KiB, MiB, GiB, or a plain integer"
UNIT_HINTS["4 KiB"] = _SIZE_HINT
Size = Annotated[
    int,
    _via(parse_bytes),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
            "description": _SIZE_HINT,
            "examples": ["4 KiB"],
        },
        mode="validation",
    ),
]


def _parse_target(value: object) -> float | str:
    """A target is a validation loss, or 'final:<config>': the final loss some config reached."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and value > 0:
            return float(value)
    if isinstance(value, str) and value.startswith("final:") and value[6:].strip():
        return "final:" + value[6:].strip()
    raise ValueError(f'expected a loss like 3.3 or "final:<config name>", got {show_value(value)}')


Target = Annotated[
    float | str,
    BeforeValidator(_parse_target),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": "^final:.+$"},
            ],
            "description": 'a validation loss, or "final:<config name>"',
        },
        mode="validation",
    ),
]


class StrictModel(BaseModel):
    """No unknown keys, no silent type coercion ('yes' is not a bool), immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
