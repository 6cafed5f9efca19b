"""headseg.export — ONNX export of the selected heads and the onnxruntime serving engine.

See docs/export.md.  One module per job, importing one way (each only from
those above it in this list, and from :mod:`headseg.analysis`):

* :mod:`.artifact` — an artifact on disk: layout, manifest, cache directories;
* :mod:`.runtime` — importing onnxruntime, probing CUDA;
* :mod:`.policy` — which device and precision serve by default;
* :mod:`.session` — running one graph (:class:`~.session.OnnxSession`);
* :mod:`.onnx_backend` — :class:`OnnxBackend`, the capture backend over an artifact;
* :mod:`.graph`, :mod:`.builder` — the graph written from the weights (numpy, onnx; no torch);
* :mod:`.wrapper`, :mod:`.reference` — the graph traced by torch and optimum (a reference for tests);
* :mod:`.exporter` — making an artifact: graph, fp16/int8, parity, manifest;
* :mod:`.provision` — finding, exporting and opening the artifact for a profile;
* :mod:`.backends` — the backends by name and :func:`make_backend`.

``OnnxBackend`` has the interface of :class:`analysis.capture.TorchBackend`;
``make_backend`` picks one of the two.
"""

from .artifact import cache_dir, cache_root, read_manifest
from .backends import backend_names, make_backend
from .onnx_backend import OnnxBackend

__all__ = ["OnnxBackend", "backend_names", "cache_dir", "cache_root", "make_backend", "read_manifest"]
