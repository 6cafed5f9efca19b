"""headseg.segmenter — segments from the selected heads: units, unit vectors, the topic search, limits, evaluation.

The public entry point is :class:`~headseg.Segmenter` (also
``headseg.Segmenter``) with its options, :class:`~headseg.segmenter.options.SegmentOptions`.
One module per step of the pipeline (``units`` → ``limits`` → ``encode`` →
``lines`` → ``topics`` / ``search``), ``stream`` for corpora, ``distributed``
for Ray actors and ``evaluation/`` for the harness; docs/layout.md lists them.
"""
