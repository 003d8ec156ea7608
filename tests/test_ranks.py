"""The rank arithmetic every text ranked among D_q goes through (nrp.ranks), by hand."""

from __future__ import annotations

import pytest

from nrp.ranks import compare, nrp_value, position, rank_from_counts


def test_compare_by_hand():
    higher, tied = compare([3.0, 2.0, 2.0, 1.0], 2.0)
    assert higher.tolist() == [True, False, False, False]
    assert tied.tolist() == [False, True, True, False]
    # a relative tolerance: within 1e-5 * max(1, |2|) = 2e-5 of 2.0 is tied
    higher, tied = compare([2.00001, 2.0001, 1.99999], 2.0, tolerance=1e-5)
    assert higher.tolist() == [False, True, False] and tied.tolist() == [True, False, True]
    # one answer score per document
    higher, tied = compare([1.0, 1.0], [0.5, 1.0])
    assert higher.tolist() == [True, False] and tied.tolist() == [False, True]
    with pytest.raises(ValueError, match="NaN score"):
        compare([1.0], float("nan"))


def test_one_document_above_two_tied_of_four_is_nrp_one_half_under_mid():
    above, ties = position([3.0, 2.0, 2.0, 1.0], 2.0)
    assert (above, ties) == (1, 2)
    # r = 1 + 2/2 = 2; NRP = 1 - 2/4
    assert nrp_value(rank_from_counts(above, ties, "mid"), 4) == 0.5
    assert nrp_value(rank_from_counts(above, ties, "optimistic"), 4) == 0.75
    assert nrp_value(rank_from_counts(above, ties, "pessimistic"), 4) == 0.25
