"""The pages of a static leaderboard site: tables, Plotly charts, annotated traces.

:func:`snapshot_html` (the leaderboard) and :func:`page_html` (every other page) assemble a
page from already computed pieces (text tables, Plotly figure JSON, escaped trace HTML), so
they are pure string functions: no store, no network. A page needs nothing but a browser and
the site's shared files (:data:`SITE_CSS`, :data:`SITE_JS` and plotly.js, written once under
``assets/`` and linked by a relative path): it opens from ``file://`` and from any static
host, its Content-Security-Policy allows scripts and styles from the site itself only and
forbids every other request, and it links only to files of the site.

Everything that comes from a store is text, never markup: table cells, headings and notes go
through :func:`legival_core.text.safe_text.html_text` (``html.escape`` with bidirectional controls
written as visible escapes); chart labels are escaped with
:func:`legival_core.text.safe_text.plotly_literal` by whoever builds the figures; the figure JSON is
embedded with ``<``, ``>`` and ``&`` written as JSON unicode escapes, so no string in it can
close the ``<script>`` element it sits in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from legival_core.text.safe_text import html_text

__all__ = [
    "ASSETS",
    "PLOTLY_ASSET",
    "SITE_CSS",
    "SITE_JS",
    "Section",
    "embed_json",
    "footer_html",
    "html_table",
    "page_html",
    "snapshot_html",
]

# No request may leave the site: scripts and styles come from the site's own files ('self';
# ``file:`` for a site opened from disk, whose origin is opaque) or sit inline, images are
# data: URLs, and nothing may be fetched, framed or posted.
_POLICY = (
    "default-src 'none'; script-src 'self' file: 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'self' file: 'unsafe-inline'; img-src data: blob:; font-src data:; "
    "connect-src 'none'; form-action 'none'; base-uri 'none'"
)
#: Where the shared files live inside a site, relative to its root.
ASSETS = "assets"
PLOTLY_ASSET = f"{ASSETS}/plotly.min.js"
_CSS_ASSET = f"{ASSETS}/site.css"
_JS_ASSET = f"{ASSETS}/site.js"
SITE_CSS = """
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
td a, th a { color: inherit; }
table.sortable th { cursor: pointer; }
table.sortable th[aria-sort="ascending"]::after { content: " ▲"; }
table.sortable th[aria-sort="descending"]::after { content: " ▼"; }
pre.text { white-space: pre-wrap; background: #f8f9f9; padding: 0.6rem; max-width: 80rem; }
footer { margin-top: 3rem; border-top: 1px solid #ddd; color: #666; font-size: 0.78rem; }
footer code { font-size: 0.75rem; }
nav.crumbs { font-size: 0.9rem; margin-bottom: 0.6rem; }
#student-answers td { white-space: pre-wrap; min-width: 4rem; max-width: 60rem; }
"""

#: The site's one script of its own: click a header of a ``table.sortable`` to sort by it
#: (numbers as numbers, "–" last; a second click reverses).
SITE_JS = """(function () {
  function key(cell) {
    var text = cell.textContent.trim();
    var number = parseFloat(text.replace(/[%,]/g, ""));
    var missing = text === "" || text === "–";
    return { text: text, number: isNaN(number) ? null : number, missing: missing };
  }
  function compare(a, b) {
    if (a.missing !== b.missing) { return a.missing ? 1 : -1; }
    if (a.number !== null && b.number !== null) { return a.number - b.number; }
    return a.text.localeCompare(b.text);
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, column) {
      th.addEventListener("click", function () {
        var down = th.getAttribute("aria-sort") === "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", down ? "descending" : "ascending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r, s) {
          var order = compare(key(r.cells[column]), key(s.cells[column]));
          var missing = key(r.cells[column]).missing || key(s.cells[column]).missing;
          return down && !missing ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
"""


@dataclass(frozen=True)
class Section:
    """One part of the page: a heading, notes, tables and charts (all optional)."""

    heading: str
    notes: Sequence[str] = ()
    tables: Sequence[tuple[str, pd.DataFrame]] = ()  # (html id, table)
    charts: Sequence[tuple[str, str]] = ()  # (html id, Plotly figure JSON)
    folded: Sequence[tuple[str, str, pd.DataFrame]] = field(default=())  # (summary, id, table)
    #: The heading's html id (a simple id, so that a link can jump to the section), or none.
    anchor: str = ""
    #: Lines that are one link each, after the notes: (text, relative address).
    see_also: Sequence[tuple[str, str]] = ()


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


def html_table(
    table: pd.DataFrame,
    table_id: str,
    low_n_mark: str = "",
    links: Mapping[str, Sequence[str | None]] | None = None,
    sortable: bool = False,
) -> str:
    """An HTML table of ``table``: every header and cell escaped; a cell's " · " parts go on
    lines of their own; cells carrying ``low_n_mark`` get the class ``low-n``, rank changes
    ``up`` / ``down``.

    ``links`` maps a column to one relative address per row (None: no link); those cells
    become links. ``sortable`` marks the table for :data:`SITE_JS`'s header sorting.

    >>> print(html_table(pd.DataFrame({"teacher": ["<b>x</b>"], "n": [3]}), "t"))
    <div class="scroll"><table id="t"><thead><tr><th>teacher</th><th>n</th></tr></thead><tbody>
    <tr><td>&lt;b&gt;x&lt;/b&gt;</td><td>3</td></tr>
    </tbody></table></div>
    >>> linked = html_table(pd.DataFrame({"a": ["x"]}), "t", links={"a": ['r/"x".html']})
    >>> linked.split("<tr>")[2].split("</tr>")[0]
    '<td><a href="r/&quot;x&quot;.html">x</a></td>'
    """
    head = "".join(f"<th>{html_text(str(c))}</th>" for c in table.columns)
    columns = list(table.columns)
    targets = {columns.index(c): list(hrefs) for c, hrefs in (links or {}).items() if c in columns}
    rows = []
    for number, row in enumerate(table.itertuples(index=False)):
        cells = []
        for column, value in enumerate(row):
            text = "–" if _is_missing(value) else str(value)
            # "24.0% [12.0–36.0] · n 50": value, n and marks on lines of their own
            lines = "<br>".join(html_text(part) for part in text.split(" · "))
            href = targets[column][number] if column in targets else None
            if href:
                lines = f'<a href="{html_text(href)}">{lines}</a>'
            cells.append(f"<td{_cell_class(text, low_n_mark)}>{lines}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    kind = ' class="sortable"' if sortable else ""
    return (
        f'<div class="scroll"><table id="{html_text(table_id)}"{kind}><thead><tr>{head}</tr>'
        "</thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>"
    )


_PIN_NOTE = (
    "the digests above, the package version and the publish options; "
    "python -m precompute publish --check SITE --store DIR says whether a store still matches."
)


def footer_html(lines: Sequence[str], pin_file: str) -> str:
    """The footer every page carries: what the site was published from (``lines``, escaped)
    and a link to the site's ``site.json`` at the relative address ``pin_file``.

    >>> footer_html(["store <demo>"], "../site.json").split("</p>")[0]
    '<footer><p>store &lt;demo&gt;'
    >>> '<a href="../site.json">site.json</a>' in footer_html([], "../site.json")
    True
    """
    body = "".join(f"<p>{html_text(line)}</p>" for line in lines)
    return (
        f'<footer>{body}<p><a href="{html_text(pin_file)}">site.json</a> pins '
        f"{_PIN_NOTE}</p></footer>"
    )


def _head(title: str, root: str, with_plotly: bool) -> list[str]:
    """The ``<head>`` of a page ``root`` (``""`` or ``"../"``) away from the site's root."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title)}</title>",
        f'<link rel="stylesheet" href="{root}{_CSS_ASSET}">',
    ]
    if with_plotly:
        parts.append(f'<script src="{root}{PLOTLY_ASSET}"></script>')
    return parts


def page_html(
    title: str,
    body: Sequence[str],
    *,
    root: str = "",
    footer: str = "",
    crumbs: Sequence[tuple[str, str]] = (),
    with_plotly: bool = False,
) -> str:
    """A page of the site: ``title`` (escaped), links back (``crumbs``: label, relative
    address), the already escaped HTML pieces of ``body``, then ``footer``.

    ``root`` is the relative way to the site's root (``"../"`` for a page in a sub-folder), for
    the shared assets. Plotly is linked only ``with_plotly``.

    >>> page = page_html("<i>t</i>", ["<p>x</p>"], root="../", crumbs=[("board", "../index.html")])
    >>> "<title>&lt;i&gt;t&lt;/i&gt;</title>" in page, 'href="../assets/site.css"' in page
    (True, True)
    >>> "plotly" in page
    False
    """
    links = " › ".join(
        f'<a href="{html_text(href)}">{html_text(label)}</a>' for label, href in crumbs
    )
    parts = [
        *_head(title, root, with_plotly),
        "</head><body>",
        f'<nav class="crumbs">{links}</nav>' if crumbs else "",
        f"<h1>{html_text(title)}</h1>",
        *body,
        footer,
        f'<script src="{root}{_JS_ASSET}"></script>',
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def snapshot_html(
    title: str,
    sections: Sequence[Section],
    downloads: Mapping[str, str] | None = None,
    low_n_mark: str = "",
    links: Mapping[str, Mapping[str, Sequence[str | None]]] | None = None,
    footer: str = "",
) -> str:
    """The leaderboard page at the site's root: ``title``, each :class:`Section` in order,
    download links to the files named in ``downloads`` (label -> relative file name), plotly.js
    and the site's style and script from ``assets/``. ``links`` maps a table's id to the links
    of its cells (see :func:`html_table`); ``footer`` closes the page.

    >>> page = snapshot_html("<i>t</i>", [Section("S", notes=["n < 20"])])
    >>> "<title>&lt;i&gt;t&lt;/i&gt;</title>" in page, "n &lt; 20" in page
    (True, True)
    >>> 'src="assets/plotly.min.js"' in page
    True
    """
    links = links or {}
    parts = [*_head(title, "", True), "</head><body>", f"<h1>{html_text(title)}</h1>"]
    if downloads:
        files = " · ".join(
            f'<a href="{html_text(name)}" download>{html_text(label)}</a>'
            for label, name in downloads.items()
        )
        parts.append(f'<p class="note">The table as data: {files}</p>')
    plots = []
    for section in sections:
        anchor = f' id="{html_text(section.anchor)}"' if section.anchor else ""
        parts.append(f"<h2{anchor}>{html_text(section.heading)}</h2>")
        parts += [f'<p class="note">{html_text(note)}</p>' for note in section.notes]
        parts += [
            f'<p class="note"><a href="{html_text(href)}">{html_text(text)}</a></p>'
            for text, href in section.see_also
        ]
        for key, figure in section.charts:
            parts.append(f'<div class="chart" id="{html_text(key)}"></div>')
            plots.append((key, figure))
        parts += [
            html_table(table, key, low_n_mark, links.get(key)) for key, table in section.tables
        ]
        for summary, key, table in section.folded:
            parts.append(
                f"<details><summary>{html_text(summary)}</summary>"
                f"{html_table(table, key, low_n_mark)}</details>"
            )
    calls = "\n".join(
        f"(function () {{ var f = {embed_json(figure)};\n"
        f"Plotly.newPlot({json.dumps(key)}, f.data, f.layout, "
        '{"displaylogo": false, "responsive": true}); })();'
        for key, figure in plots
    )
    parts += [
        f"<script>{calls}</script>",
        footer,
        f'<script src="{_JS_ASSET}"></script>',
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
