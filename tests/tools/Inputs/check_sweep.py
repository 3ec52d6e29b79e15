#!/usr/bin/env python3
"""Checks remat-sweep's outputs against each other and against what they claim.

check_sweep.py CSV SVG JSON [--measured] [--expect-infeasible] [--peers N]

- the CSV has exactly the documented columns, in order;
- infeasible rows say so (feasible 0, a note, no figures, no Pareto flag);
- every feasible row has its planned figures (and, with --measured, measured
  ones, the measured arena no larger than the planned peak);
- the Pareto flags are right: recomputed here from the peak and time the
  front uses (measured when measured, else planned and predicted; measured
  times no further apart than the larger of two rows' round spreads are
  ordered by the predicted ones);
- a measured row has a round count and a spread, and a row faster than
  `none` says how that compares with the spread;
- no point is reported twice (a point merged into a row is no row itself);
- `none` is the reference: its ratio is 1;
- the JSON holds the same rows, and the SVG parses, with one marker per
  feasible row, the front as a line, the seed's point labelled and the peers.
"""
import argparse
import csv
import json
import sys
import xml.etree.ElementTree as ET

COLUMNS = ["point", "strategy", "budget", "budget_bytes", "feasible", "also",
           "planned_peak_bytes", "predicted_peak_bytes", "activation_bytes_kept",
           "recomputed_nodes", "predicted_seconds", "predicted_ratio",
           "measured_peak_bytes", "arena_measured_bytes", "max_rss_bytes",
           "step_seconds", "step_ratio", "rounds", "step_spread_seconds",
           "pareto", "note"]


def fail(message):
    print("check_sweep: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("svg")
    parser.add_argument("json")
    parser.add_argument("--measured", action="store_true")
    parser.add_argument("--expect-infeasible", action="store_true")
    parser.add_argument("--peers", type=int, default=0)
    args = parser.parse_args()

    with open(args.csv, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, cells)) for cells in reader]
    if header != COLUMNS:
        fail("CSV columns %s, expected %s" % (header, COLUMNS))
    if not rows:
        fail("CSV has no rows")

    points = [row["point"] for row in rows]
    if len(set(points)) != len(points):
        fail("a point is reported twice: %s" % points)
    merged = [p.strip() for row in rows for p in row["also"].split(";") if p.strip()]
    for point in merged:
        if point in points:
            fail("point '%s' is both a row and merged into another" % point)

    feasible = []
    for row in rows:
        if row["feasible"] == "0":
            if not row["note"].startswith("infeasible"):
                fail("infeasible row '%s' has no note" % row["point"])
            if row["planned_peak_bytes"] or row["pareto"] or row["step_seconds"]:
                fail("infeasible row '%s' has figures" % row["point"])
            continue
        if row["feasible"] != "1":
            fail("row '%s': feasible is '%s'" % (row["point"], row["feasible"]))
        for column in ["planned_peak_bytes", "predicted_peak_bytes",
                       "predicted_seconds", "predicted_ratio"]:
            if not row[column]:
                fail("feasible row '%s' lacks %s" % (row["point"], column))
        if int(row["predicted_peak_bytes"]) > int(row["planned_peak_bytes"]):
            fail("row '%s': the predicted peak is a lower bound of the planned "
                 "one" % row["point"])
        if args.measured:
            for column in ["measured_peak_bytes", "arena_measured_bytes",
                           "max_rss_bytes", "step_seconds", "step_ratio",
                           "rounds", "step_spread_seconds"]:
                if not row[column]:
                    fail("measured row '%s' lacks %s" % (row["point"], column))
            if int(row["measured_peak_bytes"]) > int(row["planned_peak_bytes"]):
                fail("row '%s' measured more than it planned" % row["point"])
            peak, ratio = int(row["measured_peak_bytes"]), float(row["step_ratio"])
        else:
            if row["step_seconds"]:
                fail("row '%s' has measured figures without --measure" % row["point"])
            peak, ratio = int(row["planned_peak_bytes"]), float(row["predicted_ratio"])
        feasible.append((row, peak, ratio))
    infeasible = len(rows) - len(feasible)
    if args.expect_infeasible and infeasible == 0:
        fail("no infeasible row, one was expected")

    def compare_time(a, b):
        """-1 when row a is faster than row b, 1 when slower, 0 if neither."""
        sign = lambda d: (d > 0) - (d < 0)
        if args.measured:
            gap = float(a["step_seconds"]) - float(b["step_seconds"])
            noise = max(float(a["step_spread_seconds"]),
                        float(b["step_spread_seconds"]))
            if abs(gap) > noise:
                return sign(gap)
        return sign(float(a["predicted_ratio"]) - float(b["predicted_ratio"]))

    for row, peak, ratio in feasible:
        dominated = any(
            op <= peak and compare_time(other, row) <= 0 and
            (op < peak or compare_time(other, row) < 0)
            for other, op, orr in feasible if other is not row)
        if row["pareto"] != ("0" if dominated else "1"):
            fail("row '%s' (%d B, x%.4f) has pareto=%s; it is %s" % (
                row["point"], peak, ratio, row["pareto"],
                "dominated" if dominated else "on the front"))
    none = [row for row, _, _ in feasible if row["point"] == "none"]
    if len(none) != 1:
        fail("no 'none' row")
    if args.measured:
        for row, _, _ in feasible:
            faster = float(row["step_seconds"]) < float(none[0]["step_seconds"])
            if row is not none[0] and faster != row["note"].startswith(
                    "faster than none by "):
                fail("row '%s' (%s s against none's %s s) has the note '%s'" % (
                    row["point"], row["step_seconds"],
                    none[0]["step_seconds"], row["note"]))
    ratio_column = "step_ratio" if args.measured else "predicted_ratio"
    if abs(float(none[0][ratio_column]) - 1) > 1e-9:
        fail("none's %s is %s, not 1" % (ratio_column, none[0][ratio_column]))

    with open(args.json) as f:
        sweep = json.load(f)
    if [r["point"] for r in sweep["rows"]] != points:
        fail("JSON rows differ from the CSV's")
    if sweep["measured"] != args.measured:
        fail("JSON says measured=%s" % sweep["measured"])
    if len(sweep["peers"]) != args.peers:
        fail("JSON has %d peers, expected %d" % (len(sweep["peers"]), args.peers))

    ns = "{http://www.w3.org/2000/svg}"
    root = ET.parse(args.svg).getroot()
    if root.tag != ns + "svg":
        fail("SVG root is %s" % root.tag)
    titles = [g.find(ns + "title").text for g in root.iter(ns + "g")
              if g.find(ns + "title") is not None]
    for row, _, _ in feasible:
        if not any(t.startswith(row["point"] + ":") or t.startswith(row["point"] + " (")
                   for t in titles):
            fail("SVG has no marker for '%s'" % row["point"])
    texts = "".join(t.text or "" for t in root.iter(ns + "text"))
    if any(r["point"] == "every-layer" for r, _, _ in feasible) and \
            "the seed's per-layer checkpointing" not in texts:
        fail("SVG does not label the seed's point")
    if sum(1 for r, _, _ in feasible if r["pareto"] == "1") > 1 and \
            root.find(".//" + ns + "polyline") is None:
        fail("SVG has no Pareto front line")
    for peer in sweep["peers"]:
        if peer["label"] not in texts:
            fail("SVG does not show peer '%s'" % peer["label"])
    print("check_sweep: %d rows (%d infeasible), %d on the front, %d peers: ok" % (
        len(rows), infeasible, sum(1 for r, _, _ in feasible if r["pareto"] == "1"),
        len(sweep["peers"])))


if __name__ == "__main__":
    main()
