"""The optional extras: the one wording of the command that installs one, and the error of a missing one.

headseg is installed from a checkout (no package index has it), so ``pip install 'headseg[tui]'``
would fail: the hint names where this installation came from, as pip recorded it (PEP 610's
``direct_url.json``): the checkout (``-e`` for an editable install) or the wheel file.
"""

from __future__ import annotations

import functools
import json
import shlex
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse


def _distribution():
    return metadata.distribution("headseg")


def _source() -> tuple[str, bool] | None:
    """Where pip installed headseg from (a local folder or file) and whether editably; None if not known."""
    try:
        dist = _distribution()
    except metadata.PackageNotFoundError:  # not installed, run from a checkout on sys.path: that checkout
        root = Path(__file__).resolve().parents[1]
        return (str(root), True) if (root / "pyproject.toml").is_file() else None
    try:
        text = dist.read_text("direct_url.json")
        info = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return None
    url = urlparse(info["url"])
    if url.scheme != "file":  # a URL or a repository: pip can take it again, but not with an extra as simply
        return None
    dir_info = info.get("dir_info")
    return unquote(url.path), isinstance(dir_info, dict) and dir_info.get("editable") is True


@functools.lru_cache(maxsize=None)
def install_command(extra: str) -> str:
    """The command that installs headseg's ``extra`` here, e.g. ``pip install -e '/home/ann/headseg[tui]'``.

    ``pip install 'headseg[EXTRA]'`` only where pip did not record a local source (an index's install).
    """
    source = _source()
    if source is None:
        return f"pip install {shlex.quote(f'headseg[{extra}]')}"
    where, editable = source
    return f"pip install {'-e ' if editable else ''}{shlex.quote(f'{where}[{extra}]')}"


def missing_extra(needs: str, extra: str, exc: ModuleNotFoundError) -> ModuleNotFoundError:
    """The one-line error of ``needs`` (a module, a command) run without ``extra``, for ``exc``'s missing module.

    Still a :class:`ModuleNotFoundError` with the missing module's ``name``, so that code catching the
    framework's own import error goes on working; raise it ``from None``: the chained traceback of the
    framework's import says nothing more.
    """
    missing = (exc.name or "").split(".")[0] or "?"
    return ModuleNotFoundError(f"{needs} needs the '{extra}' extra ({install_command(extra)}); "
                               f"module '{missing}' is missing", name=missing)
