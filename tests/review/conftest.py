"""The study project with its reviews saved (``review_project``)."""

from __future__ import annotations

import pytest
from review_project import STUDY_REVIEWS, study_project

from nrp.review.desk import ReviewDesk
from nrp.review.store import ReviewStore


@pytest.fixture
def study(tmp_path) -> ReviewDesk:
    """The study project with every review of ``STUDY_REVIEWS`` saved."""
    desk = ReviewDesk(study_project(), ReviewStore(tmp_path / "study.reviews.sqlite"))
    for number, (item, reviewer, value) in enumerate(STUDY_REVIEWS):
        desk.save(reviewer, item, value, 0, f"s{number}")
    return desk
