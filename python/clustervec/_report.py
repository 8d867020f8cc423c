"""The HTML report of a cluster_health result: one self-contained page, plots
embedded as base64 PNGs drawn with matplotlib's Agg canvas (no pyplot, so no
global backend is switched), tables of the clusters worth a look.

Works from a pandas DataFrame or a list of dicts (cluster_health's two
results); NULL may be None, NaN or pandas.NA anywhere.
"""

import base64
import datetime
import html
import io
import math

import numpy as np

MAX_BARS = 120          # more clusters: a histogram of sizes instead of bars
MAX_EDGES = 40          # nearest-neighbour edges drawn (the closest pairs)
GRAPH_WIDTH = 13.0      # the graph's width, in median edge lengths
GRAPH_PAD = 1.0         # space around each component, the same unit
GRAPH_INCH = 0.65       # inches per median edge length
TABLE_ROWS = 10
TABLE_COLUMNS = ("cluster", "n", "cohesion", "mean_dist", "radius", "split_silhouette",
                 "centroid_silhouette", "nearest_cluster", "nearest_dist", "db_ratio",
                 "escape_probability")
SILHOUETTE_CMAP = "RdYlGn"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td.label, th.label { text-align: left; }
img { max-width: 100%; } .note { color: #666; font-style: italic; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.summary dt { font-weight: bold; } dl.summary dd { margin: 0; }
"""


# ---------------------------------------------------------------------------
# The data: columns as float arrays, NULL as NaN
# ---------------------------------------------------------------------------

def _number(value):
    if value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan          # pandas.NA and anything else that is not a number
    return number


def _records(data):
    if data is None:
        return []
    if hasattr(data, "to_dict") and hasattr(data, "columns"):
        return data.to_dict("records")
    return list(data)


class _Clusters:
    """cluster_health's rows as columns: ``num(name)`` a float array (NaN for
    NULL or a missing column), ``labels`` the display text of each cluster."""

    def __init__(self, data):
        self.rows = _records(data)
        self.k = len(self.rows)
        self._cache = {}
        ids = self.num("cluster")
        self.labels = [self._label(row.get("cluster_text"), ids[i]) for i, row in enumerate(self.rows)]
        self.index_of = {ids[i]: i for i in range(self.k) if not math.isnan(ids[i])}

    @staticmethod
    def _label(text, number):
        if isinstance(text, str):
            return text
        if math.isnan(number):
            return "?"
        return str(int(number)) if number == int(number) else repr(number)

    def num(self, name):
        if name not in self._cache:
            self._cache[name] = np.array([_number(row.get(name)) for row in self.rows], dtype=np.float64)
        return self._cache[name]

    def nearest_label(self, i):
        text = self.rows[i].get("nearest_cluster_text")
        if isinstance(text, str):
            return text
        target = self.num("nearest_cluster")[i]
        j = self.index_of.get(target)
        return self.labels[j] if j is not None else self._label(None, target)


def _weighted_mean(values, weights):
    ok = ~np.isnan(values) & ~np.isnan(weights)
    if not ok.any() or weights[ok].sum() <= 0:
        return math.nan
    return float(np.sum(values[ok] * weights[ok]) / np.sum(weights[ok]))


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------

def _figure(width=9.0, height=4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig, alt):
    return '<img alt="%s" src="data:image/png;base64,%s">' % (html.escape(alt), _png(fig))


def _note(text):
    return '<p class="note">%s</p>' % html.escape(text)


def _plot_sizes(c):
    n = c.num("n")
    ok = ~np.isnan(n)
    if not ok.any():
        return _note("no member counts")
    fig = _figure()
    ax = fig.add_subplot()
    if c.k <= MAX_BARS:
        order = [i for i in np.argsort(-np.where(ok, n, -1), kind="stable") if ok[i]]
        ax.bar(range(len(order)), n[order], color="#4c72b0")
        if len(order) <= 40:
            ax.set_xticks(range(len(order)))
            ax.set_xticklabels([c.labels[i] for i in order], rotation=60, ha="right", fontsize=8)
        else:
            ax.set_xlabel("clusters, largest first")
        ax.axhline(float(np.mean(n[ok])), color="#c44e52", linestyle="--", linewidth=1,
                   label="mean %.4g" % np.mean(n[ok]))
        ax.legend(loc="upper right")
        ax.set_ylabel("members")
    else:
        ax.hist(n[ok], bins=min(60, max(10, int(math.sqrt(ok.sum())))), color="#4c72b0")
        ax.set_xlabel("members")
        ax.set_ylabel("clusters")
    ax.set_title("%d rows in %d clusters (largest %d, smallest %d)"
                 % (np.sum(n[ok]), c.k, np.max(n[ok]), np.min(n[ok])))
    return _img(fig, "cluster sizes")


def _plot_cohesion(c):
    x, y = c.num("nearest_dist"), c.num("cohesion")
    sil, n = c.num("centroid_silhouette"), c.num("n")
    ok = ~np.isnan(x) & ~np.isnan(y)
    if not ok.any():
        return _note("needs at least two clusters (nearest_dist) and a non-zero centroid (cohesion)")
    fig = _figure(9, 5.5)
    ax = fig.add_subplot()
    sizes = 12 + 200 * np.sqrt(np.nan_to_num(n[ok]) / max(1.0, np.nanmax(n)))
    colour = np.where(np.isnan(sil[ok]), 0.0, sil[ok])
    points = ax.scatter(x[ok], y[ok], s=sizes, c=colour, cmap=SILHOUETTE_CMAP, vmin=-1, vmax=1,
                        edgecolors="#333", linewidths=0.4)
    fig.colorbar(points, ax=ax, label="centroid_silhouette")
    idx = np.nonzero(ok)[0]
    worst = idx[np.argsort(np.where(np.isnan(sil[idx]), np.inf, sil[idx]), kind="stable")[:6]]
    for i in worst:
        ax.annotate(c.labels[i], (x[i], y[i]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("separation: distance to the nearest other centroid (nearest_dist)")
    ax.set_ylabel("cohesion: mean cos(member, centroid)")
    ax.set_title("Cohesion against separation (size: members; labelled: lowest silhouette)")
    ax.grid(alpha=0.3)
    return _img(fig, "cohesion against separation")


def _silhouette_panel(ax, values, weights, name, needs):
    ok = ~np.isnan(values)
    if not ok.any():
        ax.text(0.5, 0.5, "%s: NULL for every cluster\n(%s)" % (name, needs),
                ha="center", va="center", transform=ax.transAxes, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    lo, hi = float(np.min(values[ok])), float(np.max(values[ok]))
    pad = max(0.02, 0.05 * (hi - lo))
    lo, hi = max(-1.0, lo - pad), min(1.0, hi + pad)
    ax.hist(values[ok], bins=np.linspace(lo, hi, 31), color="#55a868", edgecolor="white")
    mean = _weighted_mean(values, weights)
    ax.axvline(mean, color="#c44e52", linestyle="--", linewidth=1, label="member-weighted mean %.3f" % mean)
    if lo < 0 < hi:
        ax.axvline(0, color="#555", linewidth=0.6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(name)
    ax.set_ylabel("clusters")
    ax.set_title("%s (%d clusters; median %.3f)" % (name, ok.sum(), np.median(values[ok])))
    ax.legend(loc="upper left", fontsize=8)


def _plot_silhouettes(c):
    cs, ss, n = c.num("centroid_silhouette"), c.num("split_silhouette"), c.num("n")
    if np.isnan(cs).all() and np.isnan(ss).all():
        return _note("both silhouettes are NULL for every cluster (they need two clusters, "
                     "or a cluster of two or more members that is not collapsed)")
    fig = _figure(10, 4)
    left, right = fig.subplots(1, 2)
    _silhouette_panel(left, cs, n, "centroid_silhouette", "needs two clusters")
    _silhouette_panel(right, ss, n, "split_silhouette", "needs two members, not collapsed")
    return (_img(fig, "silhouette spread") + _note(
        "centroid_silhouette: how much closer members are to their own centroid than to the "
        "nearest other one (negative: they sit nearer a neighbour). split_silhouette: how well "
        "the cluster splits in two (high: it may be two clusters)."))


def _closest_edges(c):
    """The MAX_EDGES closest (cluster, nearest cluster) pairs, each pair once:
    [(i, j, distance, mutual)]."""
    dist, target = c.num("nearest_dist"), c.num("nearest_cluster")
    pairs = {}
    for i in np.argsort(np.where(np.isnan(dist), np.inf, dist), kind="stable"):
        j = c.index_of.get(target[i])
        if math.isnan(dist[i]) or j is None or j == i:
            continue
        key = (min(i, j), max(i, j))
        if key in pairs:
            pairs[key][3] = True
        elif len(pairs) < MAX_EDGES:
            pairs[key] = [int(i), int(j), float(dist[i]), False]
    return [tuple(p) for p in pairs.values()]


def _components(edges):
    """The connected components of the edges: lists of cluster indexes, the
    component of the closest pair first."""
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _, _ in edges:
        parent[root(i)] = root(j)
    groups = {}
    for i, j, _, _ in edges:            # edges come closest first
        for node in (i, j):
            members = groups.setdefault(root(node), [])
            if node not in members:
                members.append(node)
    return list(groups.values())


def _spring(nodes, edges, rest):
    """Positions of one component's nodes: a small deterministic spring
    layout (rest length of an edge: its distance over the median distance)."""
    m = len(nodes)
    where = {node: k for k, node in enumerate(nodes)}
    angle = 2 * math.pi * np.arange(m) / m
    pos = np.stack([np.cos(angle), np.sin(angle)], axis=1) * 0.5 * math.sqrt(m)
    if m == 2:
        return np.array([[0.0, 0.0], [rest[0], 0.0]])
    a = np.array([where[e[0]] for e in edges])
    b = np.array([where[e[1]] for e in edges])
    steps = 300
    for step in range(steps):
        delta = pos[:, None, :] - pos[None, :, :]
        d2 = np.sum(delta ** 2, axis=2) + 1e-9
        force = 0.2 * np.sum(delta / d2[:, :, None], axis=1)           # repulsion
        spring = pos[b] - pos[a]
        length = np.sqrt(np.sum(spring ** 2, axis=1)) + 1e-9
        pull = ((length - rest) / length)[:, None] * spring
        np.add.at(force, a, pull)
        np.add.at(force, b, -pull)
        norm = np.sqrt(np.sum(force ** 2, axis=1, keepdims=True)) + 1e-9
        pos += force / norm * np.minimum(norm, 0.2 * (1 - step / steps) + 0.005)
    return pos


def _layout(edges):
    """{cluster index: (x, y)} in units of the median edge length: each
    component laid out alone, then the components packed in shelves (rows)
    at most GRAPH_WIDTH wide, the closest pair's first; and the (width,
    height) of the whole."""
    lengths = np.array([e[2] for e in edges])
    median = np.median(lengths[lengths > 0]) if (lengths > 0).any() else 1.0
    rest = {(e[0], e[1]): float(np.clip(e[2] / median, 0.6, 3.0)) for e in edges}
    where = {}
    x = y = shelf = width = 0.0
    for nodes in _components(edges):
        inside = [e for e in edges if e[0] in nodes]
        pos = _spring(nodes, inside, np.array([rest[(e[0], e[1])] for e in inside]))
        pos = pos - pos.min(axis=0)
        w, h = pos.max(axis=0) + GRAPH_PAD
        if x > 0 and x + w > GRAPH_WIDTH:          # next shelf
            x, y, shelf = 0.0, y + shelf, 0.0
        for node, xy in zip(nodes, pos):
            where[node] = (x + GRAPH_PAD / 2 + xy[0], -(y + GRAPH_PAD / 2 + xy[1]))
        x += w
        shelf = max(shelf, h)
        width = max(width, x)
    return {k: np.array(v) for k, v in where.items()}, width, y + shelf


def _plot_graph(c):
    edges = _closest_edges(c)
    if not edges:
        return _note("no neighbours: nearest_cluster needs at least two clusters")
    where, width, height = _layout(edges)
    nodes = sorted(where)
    pos = np.array([where[node] for node in nodes])
    n, sil = c.num("n"), c.num("centroid_silhouette")
    fig = _figure(GRAPH_INCH * width + 1.5, GRAPH_INCH * height + 0.8)
    ax = fig.add_subplot()
    for i, j, dist, mutual in edges:
        p, q = where[i], where[j]
        if mutual:
            ax.plot([p[0], q[0]], [p[1], q[1]], color="#333", linewidth=2.2, zorder=1)
        else:
            ax.annotate("", xy=q, xytext=p, zorder=1,
                        arrowprops=dict(arrowstyle="-|>", color="#777", linewidth=1, shrinkA=9, shrinkB=9))
        mid = (p + q) / 2
        ax.text(mid[0], mid[1], "%.3g" % dist, fontsize=6.5, color="#444", ha="center", va="center",
                bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8), zorder=2)
    node_n = np.nan_to_num(n[nodes])
    sizes = 60 + 260 * np.sqrt(node_n / max(1.0, np.nanmax(n)))
    colour = np.where(np.isnan(sil[nodes]), 0.0, sil[nodes])
    points = ax.scatter(pos[:, 0], pos[:, 1], s=sizes, c=colour, cmap=SILHOUETTE_CMAP, vmin=-1, vmax=1,
                        edgecolors="#333", linewidths=0.6, zorder=3)
    for k, node in enumerate(nodes):
        ax.text(pos[k, 0], pos[k, 1], c.labels[node], fontsize=7, ha="center", va="center", zorder=4)
    fig.colorbar(points, ax=ax, label="centroid_silhouette", fraction=0.03, shrink=min(1.0, 4.0 / (GRAPH_INCH * height)))
    ax.set_xlim(0, width)
    ax.set_ylim(-height, 0)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title("The %d closest pairs: arrow to the nearest cluster, thick line when mutual; "
                 "label: centroid distance" % len(edges), fontsize=10)
    return _img(fig, "nearest-neighbour graph")


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

def _cell(c, i, name):
    if name == "cluster":
        return '<td class="label">%s</td>' % html.escape(c.labels[i])
    value = c.num(name)[i]
    if math.isnan(value):
        return "<td>NULL</td>"
    if name == "nearest_cluster":
        return '<td class="label">%s</td>' % html.escape(c.nearest_label(i))
    if name == "n":
        return "<td>%d</td>" % value
    return "<td>%.4g</td>" % value


def _table(c, order):
    head = "".join('<th%s>%s</th>' % (' class="label"' if name in ("cluster", "nearest_cluster") else "",
                                       html.escape(name)) for name in TABLE_COLUMNS)
    body = "".join("<tr>%s</tr>" % "".join(_cell(c, i, name) for name in TABLE_COLUMNS) for i in order)
    return "<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (head, body)


def _ranked(values, descending):
    ok = np.nonzero(~np.isnan(values))[0]
    key = -values[ok] if descending else values[ok]
    return ok[np.argsort(key, kind="stable")][:TABLE_ROWS].tolist()


def _tables(c):
    cohesion, sil = c.num("cohesion"), c.num("centroid_silhouette")
    parts = []
    for anchor, heading, values, descending, why, missing in (
            ("tightest", "Tightest: highest cohesion", cohesion, True,
             "members point the way their centroid does", "cohesion is NULL for every cluster (zero centroids)"),
            ("loosest", "Loosest: lowest cohesion", cohesion, False,
             "members scattered in direction around the centroid",
             "cohesion is NULL for every cluster (zero centroids)"),
            ("overlapping", "Most overlapping: lowest centroid silhouette", sil, False,
             "members nearly as close to a neighbouring centroid as to their own (see db_ratio, "
             "escape_probability)", "needs at least two clusters")):
        order = _ranked(values, descending)
        parts.append('<h3 id="%s">%s</h3>' % (anchor, html.escape(heading)))
        parts.append(_table(c, order) if order else _note(missing))
        if order:
            parts.append(_note(why))
    return "\n".join(parts)


def _summary(c):
    n = c.num("n")
    items = [("clusters", "%d" % c.k), ("rows", "%d" % np.nansum(n))]
    for label, value in (("cohesion (member-weighted)", _weighted_mean(c.num("cohesion"), n)),
                         ("centroid silhouette (member-weighted)",
                          _weighted_mean(c.num("centroid_silhouette"), n)),
                         ("Davies-Bouldin (mean db_ratio)",
                          float(np.nanmean(c.num("db_ratio"))) if (~np.isnan(c.num("db_ratio"))).any()
                          else math.nan)):
        items.append((label, "NULL" if math.isnan(value) else "%.4g" % value))
    return '<dl class="summary">%s</dl>' % "".join(
        "<dt>%s</dt><dd>%s</dd>" % (html.escape(k), html.escape(v)) for k, v in items)


# ---------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------

def render(data, title=None):
    """The report as an HTML string."""
    c = _Clusters(data)
    title = title or "clustervec cluster health"
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             "<title>%s</title>" % html.escape(title), "<style>%s</style>" % _STYLE, "</head>", "<body>",
             "<h1>%s</h1>" % html.escape(title),
             _note("cluster_health statistics (see STATISTICS.md for each column); written %s" % stamp)]
    if c.k == 0:
        parts.append('<section id="summary"><p class="empty">no clusters: the source has no row '
                     'with a non-NULL label and vector</p></section>')
    else:
        for anchor, heading, body in (
                ("summary", "Summary", _summary(c)),
                ("sizes", "Cluster sizes", _plot_sizes(c)),
                ("cohesion-separation", "Cohesion against separation", _plot_cohesion(c)),
                ("silhouette", "Silhouette spread", _plot_silhouettes(c)),
                ("neighbours", "Nearest-neighbour graph of the closest clusters", _plot_graph(c)),
                ("clusters", "Clusters to look at", _tables(c))):
            parts.append('<section id="%s">\n<h2>%s</h2>\n%s\n</section>' % (anchor, html.escape(heading), body))
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def report(data, path, title=None):
    """Write the report of ``data`` (cluster_health's DataFrame or list of
    dicts) to ``path`` as one HTML file; returns ``path``."""
    page = render(data, title)
    with open(path, "w", encoding="utf-8") as out:
        out.write(page)
    return path
