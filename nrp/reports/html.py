"""The report page: one ``index.html`` with inline CSS and no script.

Figures are ``<img>`` elements pointing at ``figures/NAME.svg`` (with links to the PNG and SVG),
and tables are rendered into the page with a link to their CSV in ``tables/``. Why relative
files and not figures embedded as data URIs: the PNG, SVG and CSV files must exist anyway (they
are what goes into a paper or a spreadsheet), a browser opens relative files from disk with no
server (``file://`` pages may load images from their own folder), and the page stays small
(a strip plot of 10,000 answers is megabytes; embedded twice it would make the page slow to
open). The cost: the page needs its folder; moving ``index.html`` alone loses the figures, which
is why the report is one folder that is replaced as a whole.

Nothing is cut off at 1,280 px: table cells wrap (numbers stay whole), long names and paths
break anywhere, and a table that is still wider scrolls inside its own box, never the page.

Everything that comes from the inputs (LLM, prompt, ranker and file names, warnings) is
HTML-escaped where it is written; the page has no script, so nothing in it can run.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  margin: 0; color: #1d2430; background: #fff; line-height: 1.45; }
header { background: #f3f5f8; border-bottom: 1px solid #d8dde5; padding: 1.2rem 2rem; }
header h1 { margin: 0 0 .6rem 0; font-size: 1.5rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0;
  font-size: .9rem; }
dl.meta dt { font-weight: 600; color: #4a5566; }
dl.meta dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
main { padding: 0 2rem 2rem 2rem; max-width: 1200px; }
nav { margin: 1rem 0; font-size: .9rem; }
nav ul { margin: .3rem 0; padding-left: 1.2rem; }
section { margin-top: 2rem; border-top: 1px solid #e3e7ee; }
h2 { font-size: 1.25rem; margin: 1rem 0 .4rem 0; }
h3 { font-size: 1.05rem; margin: 1rem 0 .3rem 0; }
p.how { background: #f7f9fc; border-left: 3px solid #8aa4c8; padding: .4rem .8rem;
  font-size: .92rem; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e7ee; }
figcaption { font-size: .85rem; color: #4a5566; }
table { border-collapse: collapse; font-size: .85rem; margin: .4rem 0 1rem 0; }
th, td { border: 1px solid #d8dde5; padding: .2rem .5rem; text-align: left; vertical-align: top;
  white-space: normal; overflow-wrap: anywhere; }
div.wrap { overflow-x: auto; max-width: 100%; }
div.files { overflow-wrap: anywhere; }
th { background: #eef1f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.chosen td { font-weight: 600; background: #f0f7ee; }
details { margin: .4rem 0 1rem 0; }
summary { cursor: pointer; color: #2b5797; }
.files { font-size: .85rem; }
.note { color: #6b4e00; }
footer { font-size: .8rem; color: #6b7687; padding: 1rem 2rem; border-top: 1px solid #e3e7ee; }
"""


def esc(value: object) -> str:
    """Text for HTML content and attribute values (quotes escaped too)."""
    return html.escape(str(value), quote=True)


@dataclass
class FigureBlock:
    stem: str  # figures/STEM.svg and .png
    alt: str
    caption: str


@dataclass
class TableBlock:
    frame: pd.DataFrame  # already in display order and with display column names
    csv: str  # the table's file name in tables/
    caption: str = ""
    collapsed: bool = False  # inside <details> (long tables)
    formats: Mapping[str, Callable[[object], str]] = field(default_factory=dict)
    highlight: str | None = None  # a boolean column: rows where it is true are emphasised


@dataclass
class Section:
    id: str
    title: str
    how: str  # what the section shows and how to read it
    blocks: list[FigureBlock | TableBlock | str] = field(default_factory=list)  # str: a paragraph


@dataclass
class Page:
    title: str
    meta: list[tuple[str, str]]  # header facts: label, value
    sections: list[Section]
    absent: Mapping[str, str]  # section title -> why it is not in this report
    notes: list[str]  # warnings of the inputs
    footer: str


def number(digits: int = 4) -> Callable[[object], str]:
    def formatted(value: object) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if isinstance(value, bool):
            return "yes" if value else ""
        if isinstance(value, int):
            return str(value)
        try:
            return f"{float(value):.{digits}f}"  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return str(value)

    return formatted


def integer(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{int(value):,}"  # type: ignore[call-overload]


def p_value(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return "<0.001" if float(value) < 0.001 else f"{float(value):.3f}"  # type: ignore[arg-type]


def table_cells(block: TableBlock) -> tuple[list[str], list[list[str]], set[str]]:
    """The columns shown (the highlight column left out), each row's cells as text (formatted
    as on the page) and the numeric columns (right-aligned): the page's, Markdown's and
    LaTeX's table (``nrp.reports.paper``) are one table."""
    frame = block.frame
    columns = [str(c) for c in frame.columns if c != block.highlight]
    numeric = {
        c
        for c in columns
        if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
    }
    numeric |= set(block.formats) & set(columns)
    rows = []
    for record in frame.to_dict("records"):
        cells = []
        for column in columns:
            value = record[column]
            if column in block.formats:
                text = block.formats[column](value)
            elif column in numeric:
                text = number()(value)
            else:
                text = "" if value is None or value is pd.NA else str(value)
            cells.append(text)
        rows.append(cells)
    return columns, rows, numeric


def _stem(name: str) -> str:
    return name[: -len(".csv")] if name.endswith(".csv") else name


def render_table(block: TableBlock) -> str:
    columns, cells, numeric = table_cells(block)
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    marks = (
        [bool(v) for v in block.frame[block.highlight]]
        if block.highlight is not None
        else [False] * len(cells)
    )
    rows = []
    for row, marked in zip(cells, marks, strict=True):
        tds = "".join(
            (f'<td class="num">{esc(t)}</td>' if c in numeric else f"<td>{esc(t)}</td>")
            for c, t in zip(columns, row, strict=True)
        )
        rows.append(f'<tr class="chosen">{tds}</tr>' if marked else f"<tr>{tds}</tr>")
    files = f'CSV: <a href="tables/{esc(block.csv)}">tables/{esc(block.csv)}</a>'
    if not block.collapsed:  # the page's main tables, also for a paper (nrp.reports.paper)
        stem = esc(_stem(block.csv))
        files += (
            f'; Markdown: <a href="tables/{stem}.md">tables/{stem}.md</a>'
            f'; LaTeX: <a href="tables/{stem}.tex">tables/{stem}.tex</a>'
        )
    table = (
        f'<div class="wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        f'<div class="files">{files} ({len(cells):,} rows)</div>'
    )
    caption = f"<p>{esc(block.caption)}</p>" if block.caption else ""
    if block.collapsed:
        summary = esc(block.caption or block.csv)
        return f"<details><summary>{summary} ({len(cells):,} rows)</summary>{table}</details>"
    return caption + table


def render_figure(block: FigureBlock) -> str:
    stem = esc(block.stem)
    return (
        f'<figure><img src="figures/{stem}.svg" alt="{esc(block.alt)}">'
        f"<figcaption>{esc(block.caption)} Files: "
        f'<a href="figures/{stem}.png">PNG</a>, <a href="figures/{stem}.svg">SVG</a>.'
        "</figcaption></figure>"
    )


def render_section(section: Section) -> str:
    parts = [f'<section id="{esc(section.id)}"><h2>{esc(section.title)}</h2>']
    parts.append(f'<p class="how">{esc(section.how)}</p>')
    for block in section.blocks:
        if isinstance(block, FigureBlock):
            parts.append(render_figure(block))
        elif isinstance(block, TableBlock):
            parts.append(render_table(block))
        else:
            parts.append(f"<p>{esc(block)}</p>")
    parts.append("</section>")
    return "\n".join(parts)


def render_page(page: Page) -> str:
    meta = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in page.meta)
    toc = "".join(f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a></li>' for s in page.sections)
    absent = "".join(f"<li>{esc(title)}: {esc(why)}</li>" for title, why in page.absent.items())
    notes = "".join(f'<li class="note">{esc(n)}</li>' for n in page.notes)
    body = "\n".join(render_section(s) for s in page.sections)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="generator" content="nrp report">',
            f"<title>{esc(page.title)}</title>",
            f"<style>{CSS}</style>",
            "</head>",
            "<body>",
            f'<header><h1>{esc(page.title)}</h1><dl class="meta">{meta}</dl></header>',
            "<main>",
            f"<nav><strong>Contents</strong><ul>{toc}</ul>"
            + (f"<strong>Not in this report</strong><ul>{absent}</ul>" if absent else "")
            + "</nav>",
            body,
            (
                f'<section id="notes"><h2>Notes and warnings</h2><ul>{notes}</ul></section>'
                if notes
                else ""
            ),
            "</main>",
            f"<footer>{esc(page.footer)}</footer>",
            "</body>",
            "</html>",
            "",
        ]
    )


def join(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "-"
