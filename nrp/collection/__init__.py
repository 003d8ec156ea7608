"""Judged collections: manifests and input formats (``formats``), ingest into one SQLite store
(``build``, ``store``), reading it back (``collection.Collection``: topics, documents, qrels per
dimension, D_q), label scales (``labels``), counts (``info``) and the reference a task carries to
a worker (``shipping``)."""
