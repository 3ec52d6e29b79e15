#!/usr/bin/env python3
"""check_loss.py FRACTION STEPS < remat-run output: the loss of step STEPS is
below FRACTION times the loss of step 1, and no step's loss is NaN."""
import math
import re
import sys

fraction, steps = float(sys.argv[1]), int(sys.argv[2])
losses = {}
for line in sys.stdin:
    m = re.match(r"step (\d+): loss (\S+)", line)
    if m:
        losses[int(m.group(1))] = float(m.group(2))
first, last = losses.get(1), losses.get(steps)
if first is None or last is None or any(math.isnan(v) for v in losses.values()):
    print("missing or NaN losses:", losses)
    sys.exit(1)
ok = last < fraction * first
print("loss %.4f -> %.4f after %d steps (%.3f of the first): %s"
      % (first, last, steps, last / first, "learns" if ok else "DOES NOT LEARN"))
sys.exit(0 if ok else 1)
