"""headseg.tui — a Textual app to inspect head matrices and segment boundaries (``headseg tui``).

The top layer beside the front door: it reads from ``headseg.analysis`` and,
when present, marks units and topics with ``headseg.segmenter``.

* :mod:`.app` — the Textual wiring: panes, keys, workers; :func:`.app.create_app`
  is the entry point and :class:`.options.AppOptions` its settings;
* :mod:`.screens` — the help and find screens; :mod:`.widgets` — the three panes;
* :mod:`.loading` — the work done off the UI thread (document, statistics,
  profile heads, segmenter marks);
* :mod:`.data` — documents, windows and per-window head matrices, without Textual;
* :mod:`.stats` — per-head statistics for the grid; :mod:`.heatmap` — pooling
  and colours; :mod:`.render` — Rich text and PNG export;
* :mod:`.screenshot` — the SVG screenshot in ``docs/tui.svg``.

Textual (the ``tui`` extra) is needed by :mod:`.app`, :mod:`.screens` and
:mod:`.widgets` only.
"""
