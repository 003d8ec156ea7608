"""The report's main tables as Markdown and LaTeX, for a paper: ``tables/NAME.md`` and
``tables/NAME.tex`` beside ``tables/NAME.csv``.

They hold the cells as the page shows them (``nrp.reports.html.table_cells``: the same rounding,
intervals and p-values), numbers right-aligned. The LaTeX is a bare booktabs ``tabular``
(``\\toprule``, ``\\midrule``, ``\\bottomrule``; needs ``\\usepackage{booktabs}``) with LaTeX's
special characters escaped, to be put inside the paper's own ``table`` with its caption. Written
by hand: pandas' ``to_latex`` needs jinja2 and escapes less.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from nrp.reports.html import TableBlock, table_cells

_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def latex_escape(text: str) -> str:
    """``text`` for LaTeX's text mode (its ten special characters, and < >)."""
    return "".join(_LATEX.get(c, c) for c in text)


def markdown_escape(text: str) -> str:
    """``text`` for a Markdown table cell (a pipe would end the cell)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(block: TableBlock) -> str:
    """A GitHub-flavoured Markdown table: header, alignment row (numbers right), rows."""
    columns, rows, numeric = table_cells(block)
    lines = [
        "| " + " | ".join(markdown_escape(c) for c in columns) + " |",
        "| " + " | ".join("---:" if c in numeric else "---" for c in columns) + " |",
    ]
    lines += ["| " + " | ".join(markdown_escape(t) for t in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def latex_table(block: TableBlock) -> str:
    """A booktabs ``tabular`` (numbers right-aligned, text left)."""
    columns, rows, numeric = table_cells(block)
    spec = "".join("r" if c in numeric else "l" for c in columns)
    lines = [
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(latex_escape(c) for c in columns) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(latex_escape(t) for t in row) + " \\\\" for row in rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_paper_tables(blocks: Iterable[TableBlock], folder: Path) -> dict[str, Path]:
    """``folder/NAME.md`` and ``folder/NAME.tex`` of each block (NAME: its CSV's stem); file
    name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for block in blocks:
        stem = block.csv.removesuffix(".csv")
        for suffix, text in ((".md", markdown_table(block)), (".tex", latex_table(block))):
            path = folder / f"{stem}{suffix}"
            path.write_text(text, encoding="utf-8")
            written[path.name] = path
    return written
