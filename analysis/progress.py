"""A minimal progress bar on stderr: silent when stderr is not a TTY or when quiet."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int | None, desc: str = "", quiet: bool = False, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = not quiet and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.total = total
        self.desc = desc
        self.n = 0
        self.t0 = time.monotonic()
        self._last = 0.0

    def update(self, k: int = 1) -> None:
        self.n += k
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or (self.total and self.n >= self.total)):
            self._last = now
            rate = self.n / max(now - self.t0, 1e-9)
            if self.total:
                frac = min(self.n / self.total, 1.0)
                bar = "#" * int(frac * 30)
                msg = f"\r{self.desc} [{bar:<30}] {self.n}/{self.total} ({rate:.1f}/s)"
            else:
                msg = f"\r{self.desc} {self.n} ({rate:.1f}/s)"
            self.stream.write(msg)
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
