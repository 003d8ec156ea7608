"""Rankers trained on a collection's own judgments: ``nrp train`` / ``train_ranker``.

A cross-encoder (``nrp.rankers.cross``) is fine-tuned on the graded (query, document text) pairs
of one quality dimension, so that NRP ranks answers the way that collection's judges graded its
documents. Honesty comes from cross-fitting: the queries are dealt into k query-disjoint folds
(``nrp.collection.folds.assign_folds``), model f is trained without fold f's queries, and the
``cross`` ranker scores every row of a query, judged document or generated answer alike, with the
model that never saw that query's judgments. Validation nDCG and leave-one-out agreement of
``cross:model=DIR`` are therefore out-of-sample figures. One more model, trained on every query,
serves queries outside the collection (``fold=all``).

The loss is pairwise (RankNet, ``loss``): a logistic loss on the score difference of every pair
of documents of one query with different grades, weighted by the grade difference (one step of
the collection's label scale weighs 1/span). Why pairwise rather than listwise (ListNet's softmax
cross-entropy with the grades as targets):

- what NRP and its checks measure is order within a query: NRP counts the documents ranked above
  an answer, leave-one-out agreement is a per-query Kendall tau-b over pairs. RankNet's loss is
  a smooth bound on the weighted count of discordant pairs; the weights make swapping Excellent
  and Incorrect cost three times a one-grade swap, as nDCG's gains would.
- it uses only the order of grades within a query. ListNet's targets depend on the gains' size
  (softmax of 0..3 is sharper than of 0..1), so collections with other scales (``--also``)
  would need a common scale invented for them.
- documents of equal grade give no gradient. ListNet pulls them to equal scores, spending the
  model on distinctions no measure counts (tau-b calls them ties).
- a query whose documents share one grade teaches nothing and costs no forward pass.

Modules: ``settings`` (``TrainSettings``), ``data`` (pairs, folds, overlaps), ``loss``,
``model`` (base model, frozen bottom, trained top), ``fit`` (one model's training run),
``train`` (``train_ranker`` and the output folder). The guard (``nrp train guard``,
``train_guard``): ``guard_settings``, ``guard_data`` (the fitting texts), ``guard_fit`` (one
detector's logistic fit and the references), ``guard_train`` (the detectors and the model file).
docs/training.md is the user's guide, docs/guard.md the guard's. The names users call are in
``nrp.api`` (``train_ranker``, ``TrainSettings``, ``TrainingResult``, ``train_guard``,
``GuardTrainSettings``); importing this package imports nothing else, so the CLI reads the defaults
cheaply.
"""
