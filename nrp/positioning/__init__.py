"""Positioning: where a ranker puts each generated answer among the judged documents D_q of its
query, and the NRP that follows.

``injection`` (the modes: each document scored once, each answer once), ``ties`` (r under the
tie rules), ``results_cache`` (positions kept per answer text), ``job`` (one positioning run as
one object), ``positioner`` (the engine every caller uses: results cache first, then computed
here or on an executor), ``partitions`` (the executor task), ``scoring`` (``score_answers`` and
``NRPScorer``: per dimension and weighted, the result rows).
"""
