"""Settings declared once: dataclass fields that carry their command-line flag, and what is made from them.

A settings class (the segmentation options, the segmenter's configuration, the
service's limits) is a frozen dataclass whose fields carry ``cli`` metadata
(:func:`flag`): the flag, its help and its argparse arguments.  Flags
(:func:`add_flags`), the values read back from parsed arguments
(:func:`values_from_args`) and any other description (an HTTP schema, a form)
are made from the fields, so a setting is declared in one place.  ``help`` and
``choices`` may be zero-argument callables (a registry's names): they are
called when the flags are made (:func:`resolved`), never at import, so what is
registered later shows.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, fields, replace
from typing import Any, Callable, Iterable, Mapping, TypeVar

from .errors import HeadsegError

S = TypeVar("S")


def flag(flag: str, help: str | Callable[[], str], **argparse_kwargs: Any) -> dict:
    """Field metadata: the setting's command-line flag, its help and its argparse arguments.

    Two keys are headseg's own, not argparse's, and are taken out before the flag is
    made: ``resume`` (True: a resumed run must have the same value) and ``commands``
    (the commands that offer the flag; absent: every command that adds the class's flags)."""
    return {"cli": {"flag": flag, "help": help, **argparse_kwargs}}


#: metadata keys of :func:`flag` that are headseg's, not argparse's
_OWN_KEYS = ("resume", "commands")


def resolved(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A field's ``cli`` metadata with its callable ``help`` and ``choices`` called (see :func:`flag`)."""
    return {k: (v() if k in ("help", "choices") and callable(v) else v) for k, v in spec.items()}


def merged(cls: type[S], base: "S | Mapping[str, Any] | None", overrides: Mapping[str, Any], kind: str,
           unknown: str) -> S:
    """``base`` (an instance of settings class ``cls``, a mapping of its fields, or None for the defaults)
    with ``overrides`` applied, validated by constructing it.

    Raises :class:`HeadsegError`: ``"{kind} must be {cls} or a mapping"`` for another ``base``, and
    ``"unknown {unknown}: names"`` for names that are no field of ``cls``.
    """
    if base is not None and not isinstance(base, (cls, Mapping)):
        raise HeadsegError(f"{kind} must be {cls.__name__} or a mapping (got {type(base).__name__})")
    given = dict(base) if isinstance(base, Mapping) else {}
    given.update(overrides)
    names = {f.name for f in fields(cls)}
    bad = set(given) - names
    if bad:
        raise HeadsegError(f"unknown {unknown}: {', '.join(sorted(bad))}")
    if isinstance(base, cls):
        return replace(base, **given) if given else base
    return cls(**given)


def cli_fields(cls: type) -> list[Field]:
    """The fields of settings class ``cls`` that have a command-line flag, in declaration order."""
    return [f for f in fields(cls) if "cli" in f.metadata]


def cli_spec(cls: type, name: str) -> dict[str, Any]:
    """The resolved ``cli`` metadata of field ``name`` of ``cls``."""
    for f in fields(cls):
        if f.name == name and "cli" in f.metadata:
            return resolved(f.metadata["cli"])
    raise KeyError(f"{cls.__name__} has no command-line setting {name!r}")


def add_flags(parser: Any, cls: type, include: Iterable[str] | None = None, exclude: Iterable[str] = (),
              command: str | None = None, defaults: Mapping[str, Any] | None = None,
              helps: Mapping[str, str] | None = None) -> None:
    """Declare one argparse flag per command-line field of ``cls`` on ``parser``.

    ``include``: only these field names (in this order); ``exclude``: leave these out;
    ``command``: leave out the fields whose ``commands`` do not name it; ``defaults``
    and ``helps``: per field, another default or help for this command.
    """
    by_name = {f.name: f for f in cli_fields(cls)}
    names = list(by_name) if include is None else list(include)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"{cls.__name__} has no command-line setting {unknown[0]!r}")
    for name in names:
        f = by_name[name]
        spec = resolved(f.metadata["cli"])
        commands = spec.get("commands")
        if name in exclude or (command is not None and commands is not None and command not in commands):
            continue
        for key in _OWN_KEYS:
            spec.pop(key, None)
        option = spec.pop("flag")
        if helps and name in helps:
            spec["help"] = helps[name]
        default = f.default if f.default is not MISSING else None
        if defaults and name in defaults:
            default = defaults[name]
        parser.add_argument(option, dest=name, default=default, **spec)


def values_from_args(cls: type, args: Any) -> dict[str, Any]:
    """The values of ``cls``'s command-line fields that parsed ``args`` carry (by attribute name)."""
    return {f.name: getattr(args, f.name) for f in cli_fields(cls) if hasattr(args, f.name)}


def resume_names(cls: type) -> tuple[str, ...]:
    """The command-line fields of ``cls`` marked ``resume``: what a resumed run must share."""
    return tuple(f.name for f in cli_fields(cls) if f.metadata["cli"].get("resume"))
