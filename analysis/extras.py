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


def _distributions() -> list:
    return list(metadata.distributions(name="headseg"))


def _source() -> tuple[str, bool] | None:
    """Where pip installed headseg from (a local folder or file) and whether editably; None if not known.

    Every ``headseg`` distribution on the path is read: run from inside the checkout, the first one
    found is the build's own ``headseg.egg-info`` there, which records no source; the installed
    one's ``direct_url.json`` does.
    """
    dists = _distributions()
    root = Path(__file__).resolve().parents[1]
    checkout = (str(root), True) if (root / "pyproject.toml").is_file() else None
    if not dists:  # not installed, run from a checkout on sys.path: that checkout
        return checkout
    for dist in dists:
        try:
            text = dist.read_text("direct_url.json")
            info = json.loads(text) if text else None
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or not isinstance(info.get("url"), str):
            continue
        url = urlparse(info["url"])
        if url.scheme != "file":  # a URL or a repository: pip can take it again, but not with an extra as simply
            return None
        dir_info = info.get("dir_info")
        return unquote(url.path), isinstance(dir_info, dict) and dir_info.get("editable") is True
    return None


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
