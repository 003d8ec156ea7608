"""HTML reports of an NRP run: ``build_report(results, out)`` / ``nrp report RESULTS --out DIR``.

A report is a folder: ``index.html`` (self-contained: inline CSS, no script, nothing fetched
from the network), ``figures/`` (each figure as PNG and SVG), ``tables/`` (each table as CSV)
and ``report.json`` (what was read and written). ``inputs`` reads the run's files,
``tables`` turns them into tables, ``figures`` draws them, ``html`` writes the page and
``build`` puts the folder together atomically.
"""

from __future__ import annotations

from nrp.reports.build import build_report

__all__ = ["build_report"]
