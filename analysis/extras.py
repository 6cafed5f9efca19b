"""The optional extras: the one wording of the command that installs one, and the error of a missing one."""

from __future__ import annotations


def install_command(extra: str) -> str:
    """The command that installs headseg's ``extra`` (e.g. ``pip install 'headseg[tui]'``)."""
    return f"pip install 'headseg[{extra}]'"


def missing_extra(needs: str, extra: str, exc: ModuleNotFoundError) -> ModuleNotFoundError:
    """The one-line error of ``needs`` (a module, a command) run without ``extra``, for ``exc``'s missing module.

    Still a :class:`ModuleNotFoundError` with the missing module's ``name``, so that code catching the
    framework's own import error goes on working; raise it ``from None``: the chained traceback of the
    framework's import says nothing more.
    """
    missing = (exc.name or "").split(".")[0] or "?"
    return ModuleNotFoundError(f"{needs} needs the '{extra}' extra ({install_command(extra)}); "
                               f"module '{missing}' is missing", name=missing)
