"""The ranking weights of one search as a value: a weight per origin and the
lesson cards' weight and extras, each within its bounds. What they do to scores, and where
they come from (the environment, a request), is ``knowledge.ranking.origin_weights``; the
value lives here so that a ``SearchQuery`` can carry it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from knowledge.core.errors import ValidationError
from knowledge.core.origin import ORIGINS

__all__ = [
    "DEFAULT_EXTRA_LESSONS",
    "DEFAULT_LESSON_WEIGHT",
    "MAX_EXTRA_LESSONS",
    "NEUTRAL",
    "WEIGHT_BOUNDS",
    "RankWeights",
    "check_weight",
    "parse_origin_weights",
]

DEFAULT_LESSON_WEIGHT: Final = 1.4
DEFAULT_EXTRA_LESSONS: Final = 2
MAX_EXTRA_LESSONS: Final = 5
WEIGHT_BOUNDS: Final = (0.1, 10.0)
"""The smallest and largest weight (origin or lesson) a deployment or a request may set."""


def check_weight(value: object, field_name: str) -> float:
    """``value`` as a weight within ``WEIGHT_BOUNDS``; ``ValidationError`` naming the field."""
    low, high = WEIGHT_BOUNDS
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field_name, f"must be a number between {low} and {high}")
    if not math.isfinite(value) or not low <= value <= high:
        raise ValidationError(field_name, f"must be between {low} and {high}, got {value!r}")
    return float(value)


def _check_extra(value: object, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field_name, f"must be an integer from 0 to {MAX_EXTRA_LESSONS}")
    if not 0 <= value <= MAX_EXTRA_LESSONS:
        raise ValidationError(field_name, f"must be from 0 to {MAX_EXTRA_LESSONS}, got {value!r}")
    return value


def parse_origin_weights(value: object, field_name: str = "origin_weights") -> dict[str, float]:
    """Origin weights from a mapping (``{"shared": 0.5}``) or its text form
    (``"shared=0.5,manual=1.2"``, what the environment and the template hold). Unknown
    origins and out-of-bounds weights are a ``ValidationError`` naming
    ``<field_name>.<origin>``."""
    items: Iterable[tuple[object, object]]
    if isinstance(value, str):
        pairs = []
        for part in (p.strip() for p in value.replace(";", ",").split(",")):
            if not part:
                continue
            name, sep, number = part.partition("=")
            if not sep:
                raise ValidationError(field_name, f"'{part}' is not ORIGIN=WEIGHT")
            try:
                pairs.append((name.strip(), float(number)))
            except ValueError:
                raise ValidationError(
                    f"{field_name}.{name.strip()}", f"'{number.strip()}' is not a number"
                ) from None
        items = pairs
    elif isinstance(value, Mapping):
        items = value.items()
    else:
        raise ValidationError(field_name, "must be an object of origin: weight")
    weights: dict[str, float] = {}
    for name, weight in items:
        if not isinstance(name, str) or name not in ORIGINS:
            raise ValidationError(
                field_name, f"{name!r} is not an origin (one of: {', '.join(ORIGINS)})"
            )
        weights[name] = check_weight(weight, f"{field_name}.{name}")
    return weights


@dataclass(frozen=True, slots=True)
class RankWeights:
    """The ranking controls of one search (module docstring)."""

    origins: Mapping[str, float] = field(default_factory=dict)
    lesson: float = DEFAULT_LESSON_WEIGHT
    extra_lessons: int = DEFAULT_EXTRA_LESSONS

    def __post_init__(self) -> None:
        given = parse_origin_weights(self.origins)
        full = {origin: given.get(origin, 1.0) for origin in ORIGINS}
        object.__setattr__(self, "origins", MappingProxyType(full))
        object.__setattr__(self, "lesson", check_weight(self.lesson, "lesson_weight"))
        object.__setattr__(self, "extra_lessons", _check_extra(self.extra_lessons, "extra_lessons"))

    def override(
        self,
        origins: Mapping[str, float] | None = None,
        lesson: float | None = None,
        extra_lessons: int | None = None,
    ) -> RankWeights:
        """These weights with a request's overrides (each origin given replaces the
        deployment's; ``None``: keep)."""
        return RankWeights(
            {**self.origins, **(origins or {})},
            self.lesson if lesson is None else lesson,
            self.extra_lessons if extra_lessons is None else extra_lessons,
        )

    def origin_weight(self, origin: object) -> float:
        """The weight of a candidate of ``origin`` (1.0 for none or an unknown one)."""
        return self.origins.get(origin, 1.0) if isinstance(origin, str) else 1.0

    @property
    def neutral_origins(self) -> bool:
        return all(weight == 1.0 for weight in self.origins.values())

    @property
    def inert(self) -> bool:
        """Whether these weights change no search: neutral origins, lessons weighted
        1.0 and none pulled in."""
        return self.neutral_origins and self.lesson == 1.0 and self.extra_lessons == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "origins": dict(self.origins),
            "lesson": self.lesson,
            "extra_lessons": self.extra_lessons,
        }


NEUTRAL: Final = RankWeights()
"""Every origin 1.0, lessons at the default weight: what a search gets unless told."""
