"""Human review: projects of items for people to rank, grade or verify, their saved answers, and
the files ``nrp meta`` reads made from them.

Every evaluator is only worth its agreement with people, so people need a tool to give their
judgments. ``nrp.review.project`` (a project file: items, reviewers, label scales; which items
each reviewer is assigned), ``nrp.review.create`` (projects built from nrp outputs: answers,
judged documents, a judge's labels), ``nrp.review.store`` (the saved reviews: SQLite, every save
committed before it is acknowledged, idempotent, optimistic locking), ``nrp.review.export`` (the
human files of ``nrp meta`` and the agreement between reviewers), ``nrp.review.labelstudio``
(Label Studio JSON in and out). The web app over them is ``nrp.service.routes.review``.
"""
