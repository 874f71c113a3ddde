"""A leaderboard as one self-contained HTML file: tables, Plotly charts and Plotly itself inline.

:func:`snapshot_html` assembles the page from already computed pieces (text tables, Plotly
figure JSON, the plotly.js source), so it is a pure string function: no store, no network.
The page needs nothing but a browser: it opens from ``file://``, its Content-Security-Policy
forbids every fetch, and it links only to the files written beside it (CSV, LaTeX).

Everything that comes from a store is text, never markup: table cells, headings and notes go
through :func:`html.escape`; chart labels are escaped with
:func:`legival_core.safe_text.plotly_literal` by whoever builds the figures; the figure JSON is
embedded with ``<``, ``>`` and ``&`` written as JSON unicode escapes, so no string in it can
close the ``<script>`` element it sits in.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

__all__ = ["Section", "embed_json", "html_table", "snapshot_html"]

# No request may leave the page: scripts and styles are inline, images are data: URLs.
_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:"
)
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1400px; color: #222;
       padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; }
p.note { color: #555; max-width: 70rem; }
table { border-collapse: collapse; font-size: 0.82rem; margin: 0.8rem 0 1.6rem; }
th, td { border: 1px solid #ddd; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top;
         white-space: nowrap; }
th { background: #f3f5f7; position: sticky; top: 0; }
td.low-n { color: #b9770e; }
td.up { color: #1e8449; } td.down { color: #c0392b; }
.scroll { overflow-x: auto; }
details { margin: 0.4rem 0; }
.chart { width: 100%; }
"""


@dataclass(frozen=True)
class Section:
    """One part of the page: a heading, notes, tables and charts (all optional)."""

    heading: str
    notes: Sequence[str] = ()
    tables: Sequence[tuple[str, pd.DataFrame]] = ()  # (html id, table)
    charts: Sequence[tuple[str, str]] = ()  # (html id, Plotly figure JSON)
    folded: Sequence[tuple[str, str, pd.DataFrame]] = field(default=())  # (summary, id, table)


def embed_json(text: str) -> str:
    """JSON made safe to sit inside ``<script>``: ``<``, ``>``, ``&`` as unicode escapes.

    Only JSON strings can contain those characters, and inside a string the escape means the
    same character, so the parsed value is unchanged.

    >>> embed_json('{"name": "</script><b>&"}')
    '{"name": "\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026"}'
    >>> json.loads(embed_json('{"name": "</script>"}'))["name"]
    '</script>'
    """
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _is_missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _cell_class(text: str, low_n_mark: str) -> str:
    if low_n_mark and low_n_mark in text:
        return ' class="low-n"'
    if text.startswith("▲"):
        return ' class="up"'
    if text.startswith("▼"):
        return ' class="down"'
    return ""


def html_table(table: pd.DataFrame, table_id: str, low_n_mark: str = "") -> str:
    """An HTML table of ``table``: every header and cell escaped; a cell's " · " parts go on
    lines of their own; cells carrying ``low_n_mark`` get the class ``low-n``, rank changes
    ``up`` / ``down``.

    >>> print(html_table(pd.DataFrame({"teacher": ["<b>x</b>"], "n": [3]}), "t"))
    <div class="scroll"><table id="t"><thead><tr><th>teacher</th><th>n</th></tr></thead><tbody>
    <tr><td>&lt;b&gt;x&lt;/b&gt;</td><td>3</td></tr>
    </tbody></table></div>
    """
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    rows = []
    for row in table.itertuples(index=False):
        cells = []
        for value in row:
            text = "–" if _is_missing(value) else str(value)
            # "24.0% [12.0–36.0] · n 50": value, n and marks on lines of their own
            lines = "<br>".join(html.escape(part) for part in text.split(" · "))
            cells.append(f"<td{_cell_class(text, low_n_mark)}>{lines}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="scroll"><table id="{html.escape(table_id)}"><thead><tr>{head}</tr></thead>'
        "<tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>"
    )


def snapshot_html(
    title: str,
    sections: Sequence[Section],
    plotly_js: str,
    downloads: Mapping[str, str] | None = None,
    low_n_mark: str = "",
) -> str:
    """The whole page: ``title``, each :class:`Section` in order, download links to the files
    named in ``downloads`` (label -> relative file name) and plotly.js inline.

    >>> page = snapshot_html("<i>t</i>", [Section("S", notes=["n < 20"])], "/*js*/")
    >>> "<title>&lt;i&gt;t&lt;/i&gt;</title>" in page, "n &lt; 20" in page, "/*js*/" in page
    (True, True, True)
    """
    # plotly.js holds no "</script", but a closing tag inside a script would end it early.
    script = plotly_js.replace("</script", "<\\/script")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style>",
        f"<script>{script}</script>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if downloads:
        links = " · ".join(
            f'<a href="{html.escape(name)}" download>{html.escape(label)}</a>'
            for label, name in downloads.items()
        )
        parts.append(f'<p class="note">The table as data: {links}</p>')
    plots = []
    for section in sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>")
        parts += [f'<p class="note">{html.escape(note)}</p>' for note in section.notes]
        for key, figure in section.charts:
            parts.append(f'<div class="chart" id="{html.escape(key)}"></div>')
            plots.append((key, figure))
        parts += [html_table(table, key, low_n_mark) for key, table in section.tables]
        for summary, key, table in section.folded:
            parts.append(
                f"<details><summary>{html.escape(summary)}</summary>"
                f"{html_table(table, key, low_n_mark)}</details>"
            )
    calls = "\n".join(
        f"(function () {{ var f = {embed_json(figure)};\n"
        f"Plotly.newPlot({json.dumps(key)}, f.data, f.layout, "
        '{"displaylogo": false, "responsive": true}); })();'
        for key, figure in plots
    )
    parts += [f"<script>{calls}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"
