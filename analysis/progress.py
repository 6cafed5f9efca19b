"""Progress bars: tqdm on stderr, shown only to a person (a TTY) and never with ``quiet``."""

from __future__ import annotations

import sys

from tqdm import tqdm


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (False for None, a replacement without ``isatty``,
    or a closed stream)."""
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def progress_bar(total: int | None = None, desc: str = "", disable: bool = False, **kwargs) -> tqdm:
    """A tqdm bar on stderr; disabled when ``disable`` or when stderr is not a terminal."""
    stream = kwargs.pop("file", sys.stderr)
    off = disable or not is_terminal(stream)
    return tqdm(total=total, desc=desc, file=stream, disable=off, leave=False, dynamic_ncols=True, **kwargs)
