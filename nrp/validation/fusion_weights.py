"""Empty. ``weights=fit`` of the ``fuse`` ranker moved to ``nrp.rankers.fusion_weights``, which the
ranker calls itself; this module stays only while ``nrp.positioning.injection`` still imports it
(that module is being rewritten on another branch: delete this file with that import)."""
