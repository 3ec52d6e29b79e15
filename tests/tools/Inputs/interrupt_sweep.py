#!/usr/bin/env python3
"""Interrupts a measured remat-sweep once its CSV has a measured row.

interrupt_sweep.py REMAT_SWEEP MODEL CSV
Runs `REMAT_SWEEP MODEL --measure ... --csv CSV` with many rounds, waits for
the first measured row to appear in CSV, sends SIGINT, and prints the exit
status and what the CSV holds then: every row must be complete (a measured
row has its step time; no feasible row is left unmeasured).
"""
import csv
import os
import signal
import subprocess
import sys
import time


def main():
    tool, model, path = sys.argv[1:4]
    proc = subprocess.Popen([tool, model, "--measure", "--steps", "1",
                             "--threads", "1", "--rounds", "50",
                             "--budgets", "60%,20%", "--csv", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(path):
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        print("remat-sweep ended before it was interrupted: exit %d\n%s" % (
            proc.returncode, proc.stderr.read().decode()))
        return 1
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    measured = sum(1 for r in rows if r["feasible"] == "1" and r["step_seconds"])
    unmeasured = sum(1 for r in rows if r["feasible"] == "1" and not r["step_seconds"])
    infeasible = sum(1 for r in rows if r["feasible"] == "0")
    print("exit %d; CSV rows measured: %d, not measured: %d, infeasible: %d" % (
        proc.returncode, measured, unmeasured, infeasible))
    if b"interrupted after" not in err:
        print("stderr does not say it was interrupted:\n" + err.decode())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
