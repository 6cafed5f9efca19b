"""headseg.serve — segmentation over HTTP (the ``serve`` extra): ``headseg serve``.

:func:`~.app.create_app` builds the FastAPI app over one :class:`~.host.Host`
(the model loaded once, the windows of concurrent requests packed into model
calls by a token budget); :mod:`.ray_serve` deploys the same app on Ray Serve.
See docs/serve.md.
"""
