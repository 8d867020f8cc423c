"""The HTML report of a cluster_health history: drift over time.

The history is the table the README's pg_cron snapshot job fills: one row
per cluster per snapshot, ``taken_at`` (the snapshot's time), that
snapshot's ``cluster_health_summary`` in ``summary_k``, ``summary_n``,
``summary_davies_bouldin``, ``summary_calinski_harabasz``,
``summary_cohesion`` and ``summary_centroid_silhouette``, then
cluster_health's columns.  A table of the summary rows alone (``taken_at``
and the ``summary_*`` columns, no ``cluster``) works too: only the summary
plots and table are drawn then.

One self-contained page, like the single-result report (_report.py): the
summary over snapshots (a table whose cells carry their exact values in
``data-value``, and plots of silhouette, Davies-Bouldin, Calinski-Harabasz,
cohesion and the total inertia over time), the sizes and mean distances of
the largest clusters over time, and their change from the first snapshot to
the last.
"""

import datetime
import html
import math

import numpy as np

from ._report import _STYLE, _figure, _img, _note, _number, _records

TOP_CLUSTERS = 8        # clusters drawn in the per-cluster trends
SUMMARY_COLUMNS = (("summary_k", "k", "%d"), ("summary_n", "rows", "%d"),
                   ("summary_centroid_silhouette", "centroid silhouette", "%.4g"),
                   ("summary_davies_bouldin", "Davies-Bouldin", "%.4g"),
                   ("summary_calinski_harabasz", "Calinski-Harabasz", "%.4g"),
                   ("summary_cohesion", "cohesion", "%.4g"),
                   ("total_inertia", "total inertia", "%.4g"))
TREND_PANELS = (("summary_centroid_silhouette", "centroid silhouette (higher: better separated)"),
                ("summary_davies_bouldin", "Davies-Bouldin (lower: better separated)"),
                ("summary_calinski_harabasz", "Calinski-Harabasz (higher: better separated)"),
                ("summary_cohesion", "cohesion (member-weighted)"),
                ("total_inertia", "total inertia (sum over clusters)"),
                ("summary_n", "rows"))
CHANGE_COLUMNS = ("n", "mean_dist", "cohesion", "centroid_silhouette")


class _Snapshot:
    """One snapshot: its time, summary figures and cluster rows."""

    def __init__(self, taken_at):
        self.taken_at = taken_at
        self.rows = []
        self.figures = {}


def _label(row):
    text = row.get("cluster_text")
    if isinstance(text, str):
        return text
    number = _number(row.get("cluster"))
    if math.isnan(number):
        return "?"
    return str(int(number)) if number == int(number) else repr(number)


def _snapshots(data):
    """The rows grouped by taken_at, oldest first."""
    groups = {}
    for row in _records(data):
        taken_at = row.get("taken_at")
        if taken_at is None:
            continue
        groups.setdefault(taken_at, _Snapshot(taken_at)).rows.append(row)
    snapshots = [groups[key] for key in sorted(groups)]
    for s in snapshots:
        first = s.rows[0]
        for column, _, _ in SUMMARY_COLUMNS:
            if column != "total_inertia":
                s.figures[column] = _number(first.get(column))
        inertia = np.array([_number(r.get("inertia")) for r in s.rows if "cluster" in r])
        s.figures["total_inertia"] = (float(np.nansum(inertia)) if inertia.size
                                      and not np.isnan(inertia).all() else math.nan)
    return snapshots


def _has_clusters(snapshots):
    return any("cluster" in row for s in snapshots for row in s.rows)


def _when(taken_at):
    if isinstance(taken_at, datetime.datetime):
        return taken_at.strftime("%Y-%m-%d %H:%M:%S")
    return str(taken_at)


def _summary_table(snapshots):
    head = '<th class="label">taken_at</th>' + "".join(
        "<th>%s</th>" % html.escape(name) for _, name, _ in SUMMARY_COLUMNS)
    body = []
    for s in snapshots:
        cells = ['<td class="label">%s</td>' % html.escape(_when(s.taken_at))]
        for column, _, fmt in SUMMARY_COLUMNS:
            value = s.figures[column]
            cells.append("<td>NULL</td>" if math.isnan(value) else
                         '<td data-column="%s" data-value="%r">%s</td>' % (column, value, fmt % value))
        body.append("<tr>%s</tr>" % "".join(cells))
    return '<table id="summary-table"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (
        head, "".join(body))


def _times(snapshots):
    return [s.taken_at for s in snapshots]


def _plot_summary(snapshots):
    panels = [(c, t) for c, t in TREND_PANELS
              if any(not math.isnan(s.figures[c]) for s in snapshots)]
    if not panels:
        return _note("every summary figure is NULL")
    rows = (len(panels) + 1) // 2
    fig = _figure(10, 2.6 * rows)
    axes = fig.subplots(rows, 2, squeeze=False)
    times = _times(snapshots)
    for ax, (column, title) in zip(axes.flat, panels):
        values = [s.figures[column] for s in snapshots]
        ax.plot(times, values, marker="o", color="#4c72b0")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return _img(fig, "summary over time")


def _largest(snapshots):
    """The TOP_CLUSTERS largest clusters of the last snapshot, largest first."""
    last = [r for r in snapshots[-1].rows if "cluster" in r]
    last.sort(key=lambda r: (-np.nan_to_num(_number(r.get("n")), nan=-1), _label(r)))
    return [_label(r) for r in last[:TOP_CLUSTERS]]


def _series(snapshots, label, column):
    values = []
    for s in snapshots:
        match = [r for r in s.rows if _label(r) == label]
        values.append(_number(match[0].get(column)) if match else math.nan)
    return values


def _plot_clusters(snapshots, labels, column, ylabel, alt):
    if not any(not math.isnan(v) for label in labels for v in _series(snapshots, label, column)):
        return _note("%s is NULL for these clusters" % column)
    fig = _figure(10, 4.5)
    ax = fig.add_subplot()
    times = _times(snapshots)
    for label in labels:
        ax.plot(times, _series(snapshots, label, column), marker="o", label=label)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="cluster")
    ax.set_title("The %d largest clusters of the last snapshot" % len(labels))
    return _img(fig, alt)


def _changes_table(snapshots, labels):
    first, last = snapshots[0], snapshots[-1]
    head = '<th class="label">cluster</th>' + "".join(
        "<th>%s first</th><th>%s last</th>" % (c, c) for c in CHANGE_COLUMNS)
    body = []
    for label in labels:
        cells = ['<td class="label">%s</td>' % html.escape(label)]
        for column in CHANGE_COLUMNS:
            for s, when in ((first, "first"), (last, "last")):
                value = _series([s], label, column)[0]
                fmt = "%d" if column == "n" else "%.4g"
                cells.append("<td>NULL</td>" if math.isnan(value) else
                             '<td data-cluster="%s" data-column="%s" data-when="%s" data-value="%r">%s</td>'
                             % (html.escape(label), column, when, value, fmt % value))
        body.append("<tr>%s</tr>" % "".join(cells))
    return '<table id="changes-table"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (
        head, "".join(body))


def render_history(data, title=None):
    """The history report as an HTML string."""
    snapshots = _snapshots(data)
    title = title or "clustervec cluster health over time"
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             "<title>%s</title>" % html.escape(title), "<style>%s</style>" % _STYLE, "</head>", "<body>",
             "<h1>%s</h1>" % html.escape(title),
             _note("%d snapshots of cluster_health and cluster_health_summary; written %s"
                   % (len(snapshots), stamp))]
    if not snapshots:
        parts.append('<section id="history-summary"><p class="empty">no snapshots: the history '
                     'table has no row with a taken_at</p></section>')
    else:
        sections = [("history-summary", "Summary by snapshot", _summary_table(snapshots))]
        if len(snapshots) < 2:
            sections.append(("summary-trend", "Summary over time",
                             _note("one snapshot: trends need two or more")))
        else:
            sections.append(("summary-trend", "Summary over time", _plot_summary(snapshots)))
        if _has_clusters(snapshots):
            labels = _largest(snapshots)
            if len(snapshots) >= 2:
                sections.append(("size-trend", "Sizes of the largest clusters",
                                 _plot_clusters(snapshots, labels, "n", "members", "cluster sizes over time")))
                sections.append(("spread-trend", "Mean distance to the centroid of the largest clusters",
                                 _plot_clusters(snapshots, labels, "mean_dist", "mean_dist",
                                                "mean distance over time")))
            sections.append(("cluster-changes", "The largest clusters, first and last snapshot",
                             _changes_table(snapshots, labels)))
        for anchor, heading, body in sections:
            parts.append('<section id="%s">\n<h2>%s</h2>\n%s\n</section>' % (anchor, html.escape(heading), body))
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def history_report(data, path, title=None):
    """Write the history report of ``data`` (the history table's rows: a
    DataFrame or a list of dicts) to ``path``; returns ``path``."""
    page = render_history(data, title)
    with open(path, "w", encoding="utf-8") as out:
        out.write(page)
    return path
