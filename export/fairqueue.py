"""The batcher's queue: pending items kept per caller and taken round-robin, so no caller's share is unbounded.

One queue, first come first served, let a caller with thousands of windows (a
16 KB run of ``'.'`` is hundreds of the unit detector's 64-token windows, then
the units' own) hold every lane until it was done: an ordinary request queued behind six of them waited
for all of their windows (issue 49, item 10).  Here each caller (a
:class:`~headseg.export.batcher.Ticket`: one request, or one document; a call
without a ticket is a caller of its own) has its own FIFO, and the callers take
turns: a single-window lane takes the head of the next caller in turn, a
packing lane fills its token budget one item per caller per round.  A caller
that arrives behind ``C`` others is thus served within one round of ``C``
calls, however much those others queued; each caller's items still run in the
order it gave them.  Which items share a call never changes an int8 lane's
results (one window per call), and a packing backend's rows do not depend on
their neighbours either (padding is masked), so only the order changes.

Not thread-safe: the batcher calls it under its lock.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Callable, Hashable, Iterable

__all__ = ["FairQueue"]


class FairQueue:
    """Items ``(job, k)`` per caller; :meth:`take_one` and :meth:`take_budget` serve the callers in turn.

    ``caller(job)``: the key a job's items are queued under; ``windows(job, k)`` and ``tokens(job, k)``:
    the size of item ``k``; ``live(job)``: False for a job whose items are to be skipped (cancelled or
    failed), checked as items are taken.
    """

    def __init__(self, caller: Callable[[object], Hashable], windows: Callable[[object, int], int],
                 tokens: Callable[[object, int], int], live: Callable[[object], bool]):
        self._caller, self._windows, self._tokens, self._live = caller, windows, tokens, live
        # callers in turn order (the next to serve first), each with its items in the order given
        self._queues: OrderedDict[Hashable, deque] = OrderedDict()
        self.windows = 0  # windows of the items queued

    def __bool__(self) -> bool:
        return bool(self._queues)

    def __iter__(self):
        """Every queued item, caller by caller."""
        for q in self._queues.values():
            yield from q

    def extend(self, job, items: Iterable[int]) -> None:
        """Queue ``job``'s items ``k`` at the end of its caller's queue (a new caller takes the last turn)."""
        q = self._queues.setdefault(self._caller(job), deque())
        for k in items:
            q.append((job, k))
            self.windows += self._windows(job, k)

    def remove(self, caller: Hashable) -> list:
        """Take all of ``caller``'s items out of the queue; the items."""
        q = self._queues.pop(caller, None) or deque()
        self.windows -= sum(self._windows(j, k) for j, k in q)
        return list(q)

    def clear(self) -> list:
        """Take every item out; the items."""
        items = list(self)
        self._queues.clear()
        self.windows = 0
        return items

    def _pop(self, caller: Hashable) -> tuple:
        q = self._queues[caller]
        job, k = q.popleft()
        self.windows -= self._windows(job, k)
        if not q:
            del self._queues[caller]
        return job, k

    def take_one(self) -> list:
        """The first live item of the caller whose turn it is (that caller then takes the last turn); [] when
        only dead items were queued (they are dropped)."""
        while self._queues:
            caller = next(iter(self._queues))
            job, k = self._pop(caller)
            if caller in self._queues:
                self._queues.move_to_end(caller)
            if self._live(job):
                return [(job, k)]
        return []

    def take_budget(self, budget: int, key: Callable[[object], Hashable]) -> list:
        """Items of one kind (``key(job)``, the kind of the next caller's first item) for one call of at most
        ``budget`` tokens: one item per caller per round, callers in turn, until the next item would not
        fit (an item over the budget alone is taken alone).  The first caller served takes the last turn
        next time.  A caller whose next item is of another kind waits for a call of its kind."""
        while self._queues and not self._live(self._queues[next(iter(self._queues))][0][0]):
            self._pop(next(iter(self._queues)))  # dead items at the head: dropped, not a call's kind
        if not self._queues:
            return []
        first = next(iter(self._queues))
        kind = key(self._queues[first][0][0])
        batch, tokens, full = [], 0, False
        while not full:
            took = False
            for caller in list(self._queues):
                q = self._queues.get(caller)
                while q and not self._live(q[0][0]):
                    self._pop(caller)
                    q = self._queues.get(caller)
                if not q or key(q[0][0]) != kind:
                    continue
                n = self._tokens(*q[0])
                if batch and tokens + n > budget:
                    full = True  # the budget is full: the rest waits, in turn
                    break
                batch.append(self._pop(caller))
                tokens += n
                took = True
            if not took:
                break
        if first in self._queues:
            self._queues.move_to_end(first)
        return batch
