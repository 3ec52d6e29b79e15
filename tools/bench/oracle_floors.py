#!/usr/bin/env python3
"""remat's smallest feasible peak against the oracle's, from the oracle's JSON rows.

remat_oracle.py --json writes, per graph it solved, the oracle's smallest feasible
peak. This script asks a remat-opt (another build, say) for its smallest feasible
planned peak on the same graphs, without solving the MILP again, and prints how many
are within 5% of the oracle's, the median and the worst gap.

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", nargs="+")
    parser.add_argument("--remat-opt", required=True)
    parser.add_argument("--graphs", required=True)
    parser.add_argument("--json", help="write graph, oracle and remat peaks here")
    args = parser.parse_args()
    oracle = types.SimpleNamespace(remat_opt=args.remat_opt, bind=None)
    out = []
    for path in args.rows:
        with open(path) as f:
            for row in json.load(f):
                if "oracle_smallest_peak" not in row:
                    continue
                model = os.path.join(args.graphs, row["graph"] + ".rir")
                if not os.path.exists(model):
                    print(f"error: {model}: no such graph", file=sys.stderr)
                    return 1
                with tempfile.TemporaryDirectory() as directory:
                    peak = remat_oracle.remat_smallest_peak(oracle, model, directory)
                out.append({"graph": row["graph"], "oracle_smallest_peak":
                            row["oracle_smallest_peak"], "remat_smallest_peak": peak})
    if not out:
        print("error: no row has an oracle_smallest_peak", file=sys.stderr)
        return 1
    gaps = [r["remat_smallest_peak"] / r["oracle_smallest_peak"] - 1 for r in out]
    worst = max(range(len(out)), key=lambda i: gaps[i])
    print(f"{len(out)} graphs: remat's smallest peak within 5% of the oracle's in "
          f"{sum(g <= 0.05 for g in gaps)}, below it in {sum(g < 0 for g in gaps)}; "
          f"median gap {statistics.median(gaps):+.1%}, worst {gaps[worst]:+.1%} "
          f"({out[worst]['graph']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
