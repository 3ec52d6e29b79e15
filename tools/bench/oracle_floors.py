#!/usr/bin/env python3
"""remat's smallest feasible peak and its time at each budget against the oracle's,
from the oracle's JSON rows.

remat_oracle.py --json writes, per graph it solved, the oracle's smallest feasible
peak, and the optimal predicted time at each budget it solved. This script asks a
remat-opt (another build, say) for its smallest feasible planned peak on the same
graphs and for auto's predicted time at the same budgets, without solving the MILP
again, and prints how many are within 5% of the oracle's, the median and the worst gap
of each.

Usage:
  oracle_floors.py --remat-opt build/remat-opt --graphs DIR [--json OUT] ROWS.json...
DIR holds the graphs the rows name (<graph>.rir, as remat_oracle.py was given them).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remat_oracle  # noqa: E402


def summarize(gaps):
    """(how many of the relative \\p gaps are within 5%, their median, (index, gap) of the
    worst)."""
    worst = max(range(len(gaps)), key=lambda i: gaps[i])
    return sum(g <= 0.05 for g in gaps), statistics.median(gaps), (worst, gaps[worst])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", nargs="+")
    parser.add_argument("--remat-opt", required=True)
    parser.add_argument("--graphs", required=True)
    parser.add_argument("--json", help="write the graphs' oracle and remat peaks and times here")
    args = parser.parse_args()
    oracle = types.SimpleNamespace(remat_opt=args.remat_opt, bind=None)
    out, timed = [], []
    for path in args.rows:
        with open(path) as f:
            for row in json.load(f):
                if "oracle_smallest_peak" not in row and row.get("oracle_status") != "optimal":
                    continue
                model = os.path.join(args.graphs, row["graph"] + ".rir")
                if not os.path.exists(model):
                    print(f"error: {model}: no such graph", file=sys.stderr)
                    return 1
                with tempfile.TemporaryDirectory() as directory:
                    if "budget" in row:
                        answer = remat_oracle.remat_answer(oracle, model, row["budget"],
                                                           directory)
                        timed.append({"graph": row["graph"], "budget": row["budget"],
                                      "oracle_seconds": row["oracle_seconds"],
                                      "auto_seconds": answer[1] if answer else None})
                        continue
                    peak = remat_oracle.remat_smallest_peak(oracle, model, directory)
                out.append({"graph": row["graph"], "oracle_smallest_peak":
                            row["oracle_smallest_peak"], "remat_smallest_peak": peak})
    solved = [r for r in timed if r["auto_seconds"] is not None]
    if solved:
        within, median, worst = summarize(
            [r["auto_seconds"] / r["oracle_seconds"] - 1 for r in solved])
        print(f"{len(timed)} budgets the oracle solved: auto has a plan at {len(solved)}, "
              f"its predicted time within 5% of the optimum at {within}; median gap "
              f"{median:+.1%}, worst {worst[1]:+.1%} ({solved[worst[0]]['graph']} at "
              f"{solved[worst[0]]['budget']} B)")
    if not out:
        print("error: no row has an oracle_smallest_peak", file=sys.stderr)
        return 1
    gaps = [r["remat_smallest_peak"] / r["oracle_smallest_peak"] - 1 for r in out]
    within, median, worst = summarize(gaps)
    print(f"{len(out)} graphs: remat's smallest peak within 5% of the oracle's in "
          f"{within}, below it in {sum(g < 0 for g in gaps)}; "
          f"median gap {median:+.1%}, worst {worst[1]:+.1%} ({out[worst[0]]['graph']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out + timed, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
