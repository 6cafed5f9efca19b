"""headseg inside document-processing frameworks.

One module per framework, each behind its own extra, imported only when asked
for (importing :mod:`headseg` or this package imports no framework):

* :mod:`headseg.integrations.langchain` — ``HeadsegTextSplitter`` (``pip install "/path/to/headseg[langchain]"``)
* :mod:`headseg.integrations.llamaindex` — ``HeadsegNodeParser`` (``pip install "/path/to/headseg[llamaindex]"``)
* :mod:`headseg.integrations.haystack` — ``HeadsegDocumentSplitter`` (``pip install "/path/to/headseg[haystack]"``)

Every adapter takes a ready :class:`~headseg.Segmenter` or the arguments to
build one (``model``, ``profile``, ``backend``, ``device``), and the segmenting
options of :meth:`~headseg.Segmenter.segment`: every field of
:class:`~headseg.segmenter.options.SegmentOptions` as a keyword argument
(``level``, ``max_chars``, ``max_tokens``, ``token_counter``...), validated
when the adapter is built.  Chunks carry headseg's exact character offsets and
tile their document.
"""
