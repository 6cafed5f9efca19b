"""Progress bars: tqdm on stderr, shown only to a person (a TTY) and never with ``quiet``."""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(total: int | None = None, desc: str = "", disable: bool = False, **kwargs) -> tqdm:
    """A tqdm bar on stderr; disabled when ``disable`` or when stderr is not a terminal."""
    stream = kwargs.pop("file", sys.stderr)
    off = disable or not (hasattr(stream, "isatty") and stream.isatty())
    return tqdm(total=total, desc=desc, file=stream, disable=off, leave=False, dynamic_ncols=True, **kwargs)
