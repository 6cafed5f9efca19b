"""Transitional: the two names ``segmenter/api.py`` still imports from here.

The serving engine was split by job (:mod:`.runtime`, :mod:`.policy`,
:mod:`.session`, :mod:`.engine`, :mod:`.serve`, :mod:`.backends`).  Import
:func:`~.backends.make_backend` from :mod:`headseg.export.backends` and
:func:`~.serve.artifact_profile` from :mod:`headseg.export.serve`; this module
goes once ``segmenter/api.py`` does.
"""

from .backends import make_backend
from .serve import artifact_profile

__all__ = ["artifact_profile", "make_backend"]
