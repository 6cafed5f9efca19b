"""Registries by name: one small typed :class:`Registry` for every kind of thing headseg lets a module add.

Levels, output formats, capture backends, evaluation methods and model
families are each a :class:`Registry` of their own kind of entry.  Every one
refuses a name taken twice (a second entry would silently replace the first),
keeps registration order (the order users see in choices and help), and refuses
an unknown name in one line that names the choices.  It lives on the floor
because every layer registers something.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Generic, Iterator, TypeVar

from .errors import HeadsegError, shown

T = TypeVar("T")
F = TypeVar("F")


class Registry(Generic[T]):
    """Entries of type ``T`` by name, in registration order.

    ``kind`` names an entry in messages (``"backend"``: "unknown backend 'x'
    (use auto, onnx, torch)"); ``error`` is the exception an unknown name
    raises; ``describe`` gives an entry's one clause for :meth:`help`.
    """

    def __init__(self, kind: str, *, error: type[HeadsegError] = HeadsegError,
                 describe: Callable[[T], str] | None = None):
        self.kind = kind
        self.error = error
        self._describe = describe
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T, *, first: bool = False) -> T:
        """Register ``entry`` as ``name`` (``first``: at the head of the order); refuses a name taken."""
        if not isinstance(name, str) or not name:
            raise HeadsegError(f"a {self.kind} name must be a non-empty string (got {shown(name)})")
        if name in self._entries:
            raise HeadsegError(f"{self.kind} '{name}' is already registered")
        if first:
            self._entries = {name: entry, **self._entries}
        else:
            self._entries[name] = entry
        return entry

    def register(self, name: str, build: Callable[[F], T] | None = None, *,
                 first: bool = False) -> Callable[[F], F]:
        """Decorator: register ``build(obj)`` (the decorated object itself without ``build``) as ``name``,
        and return the object unchanged.  The name is refused at once when taken, before decorating."""
        if name in self._entries:
            raise HeadsegError(f"{self.kind} '{name}' is already registered")

        def decorate(obj: F) -> F:
            self.add(name, obj if build is None else build(obj), first=first)  # type: ignore[arg-type]
            return obj

        return decorate

    def unknown(self, name: object, *, also: str = "") -> HeadsegError:
        """The error for an unknown ``name``: one line naming the choices (and ``also``, e.g. ``"all"``)."""
        choices = ", ".join(self._entries) + (f" or {also}" if also else "")
        return self.error(f"unknown {self.kind} {name!r} (use {choices})")

    def get(self, name: object) -> T:
        """The entry of ``name``; :meth:`unknown`'s error when there is none."""
        entry = self.find(name)
        if entry is None:
            raise self.unknown(name)
        return entry

    __getitem__ = get

    def find(self, name: object) -> T | None:
        """The entry of ``name``, or None (a name that is not a string included)."""
        return self._entries.get(name) if isinstance(name, str) else None

    def names(self) -> tuple[str, ...]:
        """The registered names, in registry order."""
        return tuple(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """``(name, entry)`` pairs, in registry order."""
        return list(self._entries.items())

    def values(self) -> list[T]:
        """The entries, in registry order."""
        return list(self._entries.values())

    def help(self) -> str:
        """``name: clause; name: clause`` for every entry, in order (a flag's help)."""
        describe = self._describe or (lambda entry: str(getattr(entry, "help")))
        return "; ".join(f"{name}: {describe(entry)}" for name, entry in self._entries.items())

    @contextlib.contextmanager
    def scoped(self) -> Iterator["Registry[T]"]:
        """Entries registered inside the ``with`` block are gone after it (a test's own entries)."""
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries = saved

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
