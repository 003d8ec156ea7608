"""The ranker zoo: every ranker a PyTerrier transformer over (qid, query, docno, text) rows.

``base`` (``Ranker``: parameters, fingerprint, spec, how it is injected), ``registry`` (specs
such as ``bm25:k1=0.9`` parsed and built in one place; plug-ins through the ``nrp.rankers``
entry-point group), ``coerce`` (a ranker from a spec, a ``Ranker`` or a PyTerrier transformer),
``cache`` (scores kept per collection, ranker fingerprint and document),
``passages`` (long documents), ``workers`` (a ranker on an executor's worker), and one module per
family: ``lexical``, ``dense``, ``colbert``, ``t5``, ``cross`` (cross-encoders, and the folders
``nrp train`` writes), ``random_order``.
"""
