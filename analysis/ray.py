"""Starting or joining Ray (the ``ray`` extra), shared by the Ray study and Ray segmentation.

Ray is imported only when :func:`init_ray` is called, so nothing else needs the extra.
"""

from __future__ import annotations

from typing import Any

from .errors import InputError


def init_ray(address: str | None, num_cpus: int | None = None):
    """The ``ray`` module, connected to the cluster at ``address`` or to a local Ray it starts.

    A Ray this process has already started or joined is used as it is.
    ``num_cpus`` sizes a local Ray (ignored with ``address``); no dashboard, no
    worker logs on the driver.  A Ray that cannot be started or reached raises
    :class:`InputError`.
    """
    import ray

    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"cannot start or reach Ray{' at ' + address if address else ''}: {exc}") from None
    return ray
