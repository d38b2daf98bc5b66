"""The timeline picture (SVG or PNG, matplotlib): one lane per action on a time axis.

Each instant is a segment requested -> inflight (thin) -> completed (thick), with a tick at
its instant time; pending instants are red and run to "now" (dashed) with their instant
time written next to them; archived instants are grey, left of the line drawn at the newest
archived instant; the clean's retained window is shaded. With many instants segments shrink
to ticks and each lane shows its count; an instant's label (its time of day) is drawn
wherever it does not overlap its lane's previous one. Tick labels carry the time of day
(`16:52:50`), the date beside the axis. Every text is its own SVG text element (a legend,
no runs of spaces, which SVG renderers collapse), SVG text stays text and the parts carry
ids (`lane-<action>`, `pending-<time>`, `archived-boundary`, `clean-retained-window`,
`instant-label-<time>`, `legend`), so the file can be searched and tested.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import LakeError
from ..core.install import install_hint
from .history import InstantRecord, TimelineView, placed

LANE_ORDER = ("commit", "deltacommit", "replacecommit", "compaction", "logcompaction", "clean", "rollback",
              "savepoint", "restore", "indexing")
COLORS = {"commit": "#1f77b4", "deltacommit": "#2ca02c", "replacecommit": "#9467bd", "compaction": "#ff7f0e",
          "logcompaction": "#e377c2", "clean": "#17becf", "rollback": "#8c564b", "savepoint": "#bcbd22",
          "restore": "#7f7f7f", "indexing": "#7f7f7f"}
PENDING = "#d62728"
ARCHIVED = "#b0b0b0"
MANY = 200  # above this many instants segments shrink to ticks
LABEL_SIZE = 6.5  # points
# the date-axis tick formats per level (year, month, day, hour, minute, second): times of day
# always carry hours and minutes, and seconds where the ticks are seconds apart
TICK_FORMATS = ["%Y", "%b", "%d", "%H:%M", "%H:%M", "%H:%M:%S"]
TICK_ZERO_FORMATS = ["", "%Y", "%b", "%b-%d", "%H:%M", "%H:%M:%S"]


def draw(records: list[InstantRecord], target: Path, *, fmt: str, title: str, archived_until: str | None,
         retained_from: str | None, times_known: bool, now_ms: int) -> Path:
    """Write the picture of `records` to `target` (format `svg` or `png`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise LakeError(f"the timeline picture needs matplotlib: {install_hint('matplotlib', 'cli')}") from e

    lanes = [a for a in LANE_ORDER if any(r.action == a for r in records)]
    lanes += sorted({r.action for r in records} - set(lanes))
    index = {a: n for n, a in enumerate(reversed(lanes))}
    start = {id(r): placed(r) for r in records}
    ends = [max(r.end_ms or start[id(r)], start[id(r)]) for r in records]
    if any(r.pending for r in records):
        ends.append(now_ms)
    lo, hi = (min(start.values()), max(ends)) if records else (now_ms - 60_000, now_ms)
    pad = max((hi - lo) * 0.03, 1000)

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "airflow-lake"}):
        fig, ax = plt.subplots(figsize=(13, 2.0 + 0.45 * max(len(lanes), 1)), layout="constrained")
        try:
            ax.set_xlim(_num(lo - pad), _num(hi + pad))
            ax.set_ylim(-0.7, len(lanes) - 0.3)
            for action in lanes:
                _lane(ax, [r for r in records if r.action == action], action, index[action], start, len(records) > MANY)
            _pending(ax, records, index, start, now_ms, lo, hi)
            if archived_until:
                _archived_boundary(ax, records, archived_until, len(lanes))
            if retained_from:
                _retained_window(ax, records, retained_from, hi + pad)
            _axes(ax, records, lanes, index, title, times_known)
            fig.canvas.draw()  # lays the axes out: label widths can now be measured in pixels
            omitted = _instant_labels(ax, records, lanes, index, start)
            if omitted:
                ax.text(1.0, 1.01, f"{omitted:,} instant labels omitted where they would overlap; lanes show counts",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="#666666")
            target.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(target, format=fmt, dpi=130, metadata={"Date": None} if fmt == "svg" else None)
        finally:  # an error leaves no figure open in a long-lived process
            plt.close(fig)
    return target


def draw_view(view: TimelineView, target: Path, *, fmt: str, now_ms: int) -> Path:
    """Write the picture of a table's `TimelineView` (what `timeline --svg` draws)."""
    return draw(view.records, target, fmt=fmt, title=view.title, archived_until=view.archived_until,
                retained_from=view.retained_from, times_known=view.times_known, now_ms=now_ms)


def _num(ms: float) -> float:
    import matplotlib.dates as mdates

    return mdates.date2num(datetime.fromtimestamp(ms / 1000, timezone.utc))


def _color(record: InstantRecord) -> str:
    return PENDING if record.pending else ARCHIVED if record.archived else COLORS.get(record.action, "#333333")


def _lane(ax, records: list[InstantRecord], action: str, y: int, start: dict, many: bool) -> None:
    """One action's segments (waiting, running) and instant ticks."""
    from matplotlib.collections import LineCollection

    wait, run = [], []
    for r in records:
        begin, inflight, done = start[id(r)], r.state_ms.get("INFLIGHT"), r.state_ms.get("COMPLETED")
        if inflight and inflight > begin:
            wait.append(([(_num(begin), y), (_num(inflight), y)], _color(r)))
        if done and done > begin:
            run.append(([(_num(max(inflight or begin, begin)), y), (_num(done), y)], _color(r)))
    for segments, width, part in ((wait, 0.8 if many else 1.5, "waiting"), (run, 3 if many else 6, "running")):
        if segments:
            artist = LineCollection([s for s, _ in segments], colors=[c for _, c in segments], linewidths=width)
            artist.set_gid(f"lane-{action}-{part}")
            ax.add_collection(artist)
    marks = ax.scatter([_num(start[id(r)]) for r in records], [y] * len(records), marker="|", s=40 if many else 120,
                       c=[_color(r) for r in records], linewidths=0.6 if many else 1.2, zorder=3)
    marks.set_gid(f"lane-{action}")


def _pending(ax, records: list[InstantRecord], index: dict, start: dict, now_ms: int, lo: int, hi: int) -> None:
    """Each pending instant: dashed to now, its instant time and state written beside it."""
    for r in (r for r in records if r.pending):
        y, begin = index[r.action], start[id(r)]
        line, = ax.plot([_num(begin), _num(now_ms)], [y, y], color=PENDING, linestyle=(0, (4, 3)), linewidth=1.2,
                        zorder=2)
        line.set_gid(f"pending-{r.time}")
        right = begin > lo + 0.75 * (hi - lo)  # near the right edge: the label goes left
        ax.annotate(f"{r.time} {r.state.lower()}", (_num(begin), y), xytext=(-3 if right else 3, 7),
                    textcoords="offset points", color=PENDING, fontsize=8, fontweight="bold",
                    ha="right" if right else "left", gid=f"pending-label-{r.time}")


def _archived_boundary(ax, records: list[InstantRecord], archived_until: str, lanes: int) -> None:
    """The line at the newest archived instant: everything archived is at or left of it."""
    at = _num(_ms(records, archived_until))
    ax.axvline(at, color="#555555", linestyle="--", linewidth=1, gid="archived-boundary")
    ax.annotate(f"archived up to {archived_until}", (at, lanes - 0.35), xytext=(-4, 0), textcoords="offset points",
                ha="right", va="top", fontsize=8, color="#555555")


def _retained_window(ax, records: list[InstantRecord], retained_from: str, right_ms: float) -> None:
    left = _num(_ms(records, retained_from))
    ax.axvspan(left, _num(right_ms), color="#2ca02c", alpha=0.08, gid="clean-retained-window")
    ax.annotate(f"clean retains from {retained_from}", (_num(right_ms), -0.65), xytext=(-4, 2),
                textcoords="offset points", fontsize=8, color="#2a7a2a", ha="right")


def _axes(ax, records: list[InstantRecord], lanes: list[str], index: dict, title: str, times_known: bool) -> None:
    """Lane names with counts, the time axis, the title and the legend."""
    import matplotlib.dates as mdates
    from matplotlib.lines import Line2D

    counts = {a: sum(1 for r in records if r.action == a) for a in lanes}
    pending = {a: sum(1 for r in records if r.action == a and r.pending) for a in lanes}
    ax.set_yticks([index[a] for a in lanes],
                  [f"{a} ({counts[a]:,}" + (f", {pending[a]} pending)" if pending[a] else ")") for a in lanes])
    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=timezone.utc, formats=TICK_FORMATS,
                                                             zero_formats=TICK_ZERO_FORMATS))
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    subtitle = f"{len(records):,} instants, {sum(pending.values())} pending"
    if not times_known:
        subtitle += " - state times unknown (files copied): instant times only"
    ax.set_title(f"{title}: {subtitle}", loc="left", fontsize=10)
    ax.set_xlabel("time (UTC)")
    handles = [Line2D([], [], color="#555555", linewidth=1.5, label="requested -> inflight"),
               Line2D([], [], color="#555555", linewidth=6, label="inflight -> completed"),
               Line2D([], [], color=PENDING, linestyle=(0, (4, 3)), linewidth=1.2, label="pending (to now)"),
               Line2D([], [], color=ARCHIVED, linewidth=6, label="archived")]
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.16), ncols=4, frameon=False,
                       fontsize=8, handlelength=2.5, columnspacing=2.0)
    legend.set_gid("legend")


def _instant_labels(ax, records: list[InstantRecord], lanes: list[str], index: dict, start: dict) -> int:
    """Each completed instant's time of day under its tick where it does not overlap the lane's
    previous label (widths measured on the laid-out axes); returns how many were left out."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    to_px = ax.transData.transform
    points_to_px = ax.figure.dpi / 72
    omitted = 0
    for action in lanes:
        right_edge = None
        for r in (r for r in records if r.action == action and not r.pending):
            label = r.time[8:14] if len(r.time) >= 14 else r.time
            x = to_px((_num(start[id(r)]), 0))[0]
            if right_edge is not None and x < right_edge + 3 * points_to_px:
                omitted += 1  # (overlaps whatever its width: not measured)
                continue
            half = TextPath((0, 0), label, size=LABEL_SIZE, prop=FontProperties()).get_extents().width / 2
            half *= points_to_px
            if right_edge is not None and x - half < right_edge + 3 * points_to_px:
                omitted += 1
                continue
            ax.annotate(label, (_num(start[id(r)]), index[action]), xytext=(0, -13), textcoords="offset points",
                        ha="center", fontsize=LABEL_SIZE, color="#444444", gid=f"instant-label-{r.time}")
            right_edge = x + half
    return omitted


def _ms(records: list[InstantRecord], time_: str) -> int:
    for r in records:
        if r.time == time_:
            return placed(r)
    from ..core.timeline.clock import parse_instant

    return int(parse_instant(time_).replace(tzinfo=timezone.utc).timestamp() * 1000)
