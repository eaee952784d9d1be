"""A value that one startup task provides and tasks of later phases read.

The runtime's hubs (built by the composition root before anything runs) hold what
exists from the start; what only a startup task can make (feed specs read from the
database, the processor, the trade executor) is a StartupValue on them: typed, set
once by its one writer, and a named error when read before it was provided.
"""

from __future__ import annotations

from typing import Generic, TypeVar, overload

T = TypeVar("T")
D = TypeVar("D")


class NotProvided(LookupError):
    """A startup value was read before (or without) the task that provides it."""


class StartupValue(Generic[T]):
    __slots__ = ("_provided", "_value", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._provided = False
        self._value: T | None = None

    def provide(self, value: T) -> None:
        """Set the value; a second writer is a wiring mistake and is refused."""
        if self._provided:
            raise RuntimeError(f"startup value {self.name!r} was already provided")
        self._value, self._provided = value, True

    @property
    def provided(self) -> bool:
        return self._provided

    def get(self) -> T:
        if not self._provided:
            raise NotProvided(f"startup value {self.name!r}: no startup task of this process provided it (yet)")
        return self._value  # type: ignore[return-value]

    @overload
    def get_or(self, default: D) -> T | D: ...
    @overload
    def get_or(self, default: None = None) -> T | None: ...
    def get_or(self, default: object = None) -> object:
        """The value, or `default` where this process has no task that provides it."""
        return self._value if self._provided else default

    def __repr__(self) -> str:
        return f"StartupValue({self.name!r}, {'provided' if self._provided else 'not provided'})"
