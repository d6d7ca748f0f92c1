"""Typed settings: each collector (and the exporter itself) declares its flags once, as typed
attributes of a `Settings` class, and is given an instance of it.

Owns `Settings` (a class of flags: `add_arguments` puts them on a parser, `from_values` reads them
back from parsed flags or a capture's manifest, the constructor takes keyword overrides), `flag`
(one flag's spellings, default, type and help: the default is stated here and nowhere else) and
`SettingsError` (a setting nobody declared, or a declared one nobody parsed: raised at start-up,
never a silent fallback to a default). Imports nothing of the package: every layer may use it.

    class TunablesSettings(Settings):
        namespace = "tunables"
        refresh_interval: float = flag("--tunables.refresh-interval", type=float, default=30.0,
                                       help="seconds between reads of the module parameters (default 30)")

    TunablesSettings().refresh_interval == 30.0; TunablesSettings(refresh_interval=5).refresh_interval == 5
    TunablesSettings(refresh_intreval=5)  -> SettingsError: unknown setting refresh_intreval

A flag's argparse destination is `<namespace>_<attribute>` (`tunables_refresh_interval`), the names
captures store in their manifest; `dest=` says it where history chose another.
(Plain classes, not dataclasses: making a dataclass costs about half a millisecond of every start.)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

S = TypeVar("S", bound="Settings")
_MISSING = object()


class SettingsError(ValueError):
    """A setting that is not declared, or a declared one the parsed flags lack; one line."""


class Flag:
    """One declared flag: argparse's arguments, and the attribute and destination it fills."""

    __slots__ = ("names", "default", "options", "dest")

    def __init__(self, names: tuple[str, ...], default: Any, dest: str | None, options: dict[str, Any]):
        self.names = names
        self.default = default
        self.options = options
        self.dest = dest or ""


def flag(*names: str, default: Any = None, dest: str | None = None, **options: Any) -> Any:
    """Declare a flag as a class attribute of a `Settings` (`options` as argparse's `add_argument`
    takes them: type, choices, action, metavar, help). Typed `Any` so that the attribute's own
    annotation is what type checkers see."""
    return Flag(names, default, dest, options)


def interval(name: str, default: float, between: str, note: str = "") -> Any:
    """A refresh interval flag: seconds (a float), its default said once, in the help too."""
    return flag(name, type=float, default=default, help=f"seconds between {between} (default {default:g}){note}")


class Settings:
    """A class of flags (see the module's docstring). Instances are plain objects with one typed
    attribute per flag; they compare by value."""

    namespace: ClassVar[str] = ""  # the flags' common part: `--<namespace>.<option>`, dest `<namespace>_<attribute>`
    flags: ClassVar[dict[str, Flag]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = dict(cls.flags)  # a subclass keeps its base's flags, then adds its own
        for attribute, value in list(vars(cls).items()):
            if isinstance(value, Flag):
                value.dest = value.dest or (f"{cls.namespace}_{attribute}" if cls.namespace else attribute)
                declared[attribute] = value
                delattr(cls, attribute)  # an instance always sets it; the class keeps no stale default
        cls.flags = declared

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(self.flags))
        if unknown:
            raise SettingsError(f"{type(self).__name__}: unknown setting {', '.join(unknown)} "
                                f"(declared: {', '.join(self.flags) or 'none'})")
        for attribute, declared in self.flags.items():
            setattr(self, attribute, values.get(attribute, declared.default))

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        for declared in cls.flags.values():
            parser.add_argument(*declared.names, dest=declared.dest, default=declared.default, **declared.options)

    @classmethod
    def from_values(cls: type[S], values: Mapping[str, Any] | argparse.Namespace) -> S:
        """The settings from parsed flags (a Namespace) or a mapping keyed by destination. A
        declared flag the values lack is an error (a parser that was not given this class's flags)."""
        mapping = vars(values) if isinstance(values, argparse.Namespace) else values
        chosen = {}
        for attribute, declared in cls.flags.items():
            value = mapping.get(declared.dest, _MISSING)
            if value is _MISSING:
                raise SettingsError(f"{cls.__name__}: the parsed flags lack {declared.names[0]} ({declared.dest})")
            chosen[attribute] = value
        return cls(**chosen)

    def values(self) -> dict[str, Any]:
        """Destination -> value, as the parsed flags and a capture's manifest spell them."""
        return {declared.dest: getattr(self, attribute) for attribute, declared in self.flags.items()}

    def replace(self: S, **values: Any) -> S:
        """A copy with some settings changed (unknown names fail as in the constructor)."""
        return type(self)(**{**{a: getattr(self, a) for a in self.flags}, **values})

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, a) == getattr(other, a) for a in self.flags)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{a}={getattr(self, a)!r}' for a in self.flags)})"


class NoSettings(Settings):
    """The settings of a collector without flags of its own."""
