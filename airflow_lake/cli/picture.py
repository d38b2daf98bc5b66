"""The timeline picture (SVG or PNG, matplotlib): one lane per action on a time axis.

Each instant is a segment requested -> inflight (thin) -> completed (thick), with a tick at
its instant time; pending instants are red and run to "now" (dashed) with their instant
time written next to them; archived instants are grey left of the archived boundary; the
clean's retained window is shaded. With many instants segments shrink to ticks and each lane
shows its count; instant labels are drawn only while they fit. SVG text stays text and the
parts carry ids (`lane-<action>`, `pending-<time>`, `archived-boundary`,
`clean-retained-window`), so the file can be searched and tested.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import LakeError
from .history import InstantRecord, placed

LANE_ORDER = ("commit", "deltacommit", "replacecommit", "compaction", "logcompaction", "clean", "rollback",
              "savepoint", "restore", "indexing")
COLORS = {"commit": "#1f77b4", "deltacommit": "#2ca02c", "replacecommit": "#9467bd", "compaction": "#ff7f0e",
          "logcompaction": "#e377c2", "clean": "#17becf", "rollback": "#8c564b", "savepoint": "#bcbd22",
          "restore": "#7f7f7f", "indexing": "#7f7f7f"}
PENDING = "#d62728"
ARCHIVED = "#b0b0b0"
LABEL_LIMIT = 40  # instant labels are drawn up to this many instants


def draw(records: list[InstantRecord], target: Path, *, fmt: str, title: str, archived_until: str | None,
         first_active: str | None, retained_from: str | None, times_known: bool, now_ms: int) -> Path:
    """Write the picture of `records` to `target` (format `svg` or `png`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
    except ImportError as e:
        raise LakeError("the timeline picture needs matplotlib: pip install 'airflow-lake[cli]'") from e

    lanes = [a for a in LANE_ORDER if any(r.action == a for r in records)]
    lanes += sorted({r.action for r in records} - set(lanes))
    index = {a: n for n, a in enumerate(reversed(lanes))}
    n = len(records)

    def to_num(ms: float) -> float:
        return mdates.date2num(datetime.fromtimestamp(ms / 1000, timezone.utc))

    start = {id(r): placed(r) for r in records}
    ends = [max(r.end_ms or start[id(r)], start[id(r)]) for r in records]
    if any(r.pending for r in records):
        ends.append(now_ms)
    lo, hi = (min(start.values()), max(ends)) if records else (now_ms - 60_000, now_ms)
    pad = max((hi - lo) * 0.03, 1000)

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "airflow-lake"}):
        fig, ax = plt.subplots(figsize=(13, 1.6 + 0.45 * max(len(lanes), 1)), layout="constrained")
        ax.set_xlim(to_num(lo - pad), to_num(hi + pad))
        ax.set_ylim(-0.7, len(lanes) - 0.3)
        many = n > 200
        for action in lanes:
            y = index[action]
            wait, run, ticks, tick_colors = [], [], [], []
            for r in (r for r in records if r.action == action):
                c = PENDING if r.pending else ARCHIVED if r.archived else COLORS.get(action, "#333333")
                begin = start[id(r)]
                inflight = r.state_ms.get("INFLIGHT")
                done = r.state_ms.get("COMPLETED")
                if inflight and inflight > begin:
                    wait.append(([(to_num(begin), y), (to_num(inflight), y)], c))
                if done and done > begin:
                    run.append(([(to_num(max(inflight or begin, begin)), y), (to_num(done), y)], c))
                ticks.append(to_num(begin))
                tick_colors.append(c)
            for segments, width, part in ((wait, 0.8 if many else 1.5, "waiting"), (run, 3 if many else 6, "running")):
                if segments:
                    artist = LineCollection([seg for seg, _ in segments], colors=[c for _, c in segments],
                                            linewidths=width)
                    artist.set_gid(f"lane-{action}-{part}")
                    ax.add_collection(artist)
            marks = ax.scatter(ticks, [y] * len(ticks), marker="|", s=40 if many else 120, c=tick_colors,
                               linewidths=0.6 if many else 1.2, zorder=3)
            marks.set_gid(f"lane-{action}")
        for r in (r for r in records if r.pending):
            y = index[r.action]
            line, = ax.plot([to_num(start[id(r)]), to_num(now_ms)], [y, y], color=PENDING, linestyle=(0, (4, 3)),
                            linewidth=1.2, zorder=2)
            line.set_gid(f"pending-{r.time}")
            right = start[id(r)] > lo + 0.75 * (hi - lo)  # near the right edge: the label goes left
            ax.annotate(f"{r.time} {r.state.lower()}", (to_num(start[id(r)]), y), xytext=(-3 if right else 3, 7),
                        textcoords="offset points", color=PENDING, fontsize=8, fontweight="bold",
                        ha="right" if right else "left", gid=f"pending-label-{r.time}")
        if n <= LABEL_LIMIT:  # instant labels where they do not overlap (about 7% of the axis apart)
            gap = (hi - lo + 2 * pad) * 0.07
            for action in lanes:
                last = None
                for r in (r for r in records if r.action == action and not r.pending):
                    if last is None or start[id(r)] - last >= gap:
                        label = r.time[8:14] if len(r.time) >= 14 else r.time
                        ax.annotate(label, (to_num(start[id(r)]), index[action]), xytext=(0, -13),
                                    textcoords="offset points", ha="center", fontsize=6.5,
                                    color="#444444")
                        last = start[id(r)]
        if archived_until and first_active:
            boundary = to_num((_ms(records, archived_until) + _ms(records, first_active)) / 2)
            vline = ax.axvline(boundary, color="#555555", linestyle="--", linewidth=1)
            vline.set_gid("archived-boundary")
            ax.annotate(f"archived up to {archived_until}", (boundary, len(lanes) - 0.35), xytext=(-4, 0),
                        textcoords="offset points", ha="right", va="top", fontsize=8, color="#555555")
        if retained_from:
            start = to_num(_ms(records, retained_from))
            span = ax.axvspan(start, to_num(hi + pad), color="#2ca02c", alpha=0.08)
            span.set_gid("clean-retained-window")
            ax.annotate(f"clean retains from {retained_from}", (to_num(hi + pad), -0.65), xytext=(-4, 2),
                        textcoords="offset points", fontsize=8, color="#2a7a2a", ha="right")
        counts = {a: sum(1 for r in records if r.action == a) for a in lanes}
        pending = {a: sum(1 for r in records if r.action == a and r.pending) for a in lanes}
        ax.set_yticks([index[a] for a in lanes],
                      [f"{a}  ({counts[a]:,}" + (f", {pending[a]} pending)" if pending[a] else ")") for a in lanes])
        locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=timezone.utc))
        ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        total_pending = sum(pending.values())
        subtitle = f"{n:,} instants, {total_pending} pending"
        if not times_known:
            subtitle += " - state times unknown (files copied): instant times only"
        ax.set_title(f"{title}: {subtitle}", loc="left", fontsize=10)
        if n > LABEL_LIMIT:
            ax.text(1.0, 1.01, "instant labels omitted (too many); lanes show counts", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="#666666")
        ax.set_xlabel("time (UTC)   thin: requested -> inflight   thick: inflight -> completed   red: pending")
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, format=fmt, dpi=130, metadata={"Date": None} if fmt == "svg" else None)
        plt.close(fig)
    return target


def _ms(records: list[InstantRecord], time_: str) -> int:
    for r in records:
        if r.time == time_:
            return r.start_ms
    from ..core.timeline.clock import parse_instant

    return int(parse_instant(time_).replace(tzinfo=timezone.utc).timestamp() * 1000)
