"""Checks remat-run's memory line against the planned peak.

Reads remat-run's output on stdin, finds the last line with
"planned peak P (weights W + inputs I + arena A), measured arena peak M,
max RSS R MiB" and exits 1 unless R <= P * (1 + ratio) + slack MiB: weights
held once (the IR and the runtime share them, outputs view the arena) keep
the process close to its plan. Prints the figures either way.
"""
import argparse
import re
import sys

SIZE = r"([0-9.]+) (B|MiB)"
LINE = re.compile(r"planned peak " + SIZE + r" \(weights " + SIZE +
                  r" \+ inputs " + SIZE + r" \+ arena " + SIZE +
                  r"\), measured arena peak " + SIZE +
                  r", max RSS ([0-9.]+) MiB")


def mib(number, unit):
    return float(number) / (1 << 20) if unit == "B" else float(number)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ratio", type=float, default=0.10)
    parser.add_argument("--slack-mib", type=float, default=100.0)
    args = parser.parse_args()
    found = None
    for line in sys.stdin:
        match = LINE.search(line)
        if match:
            found = match
    if not found:
        print("error: no 'planned peak ... max RSS' line in the input")
        return 1
    planned = mib(found.group(1), found.group(2))
    weights = mib(found.group(3), found.group(4))
    rss = float(found.group(11))
    limit = planned * (1 + args.ratio) + args.slack_mib
    verdict = "within" if rss <= limit else "over"
    print("max RSS %.1f MiB %s the limit %.1f MiB (planned peak %.1f MiB, "
          "weights %.1f MiB)" % (rss, verdict, limit, planned, weights))
    return 0 if rss <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
