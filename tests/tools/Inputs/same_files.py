"""same_files.py SUBSET FULL: every file of SUBSET (but index.json) must be in FULL with the
same bytes; prints how many, and the files only FULL has. Exit 1 on a missing or differing
file."""
import os
import sys

subset, full = sys.argv[1:3]
mine = sorted(f for f in os.listdir(subset) if f != "index.json")
theirs = sorted(f for f in os.listdir(full) if f != "index.json")
bad = []
for name in mine:
    path = os.path.join(full, name)
    if not os.path.exists(path):
        bad.append(f"{name} is not in {full}")
    elif open(path, "rb").read() != open(os.path.join(subset, name), "rb").read():
        bad.append(f"{name} differs")
for line in bad:
    print("MISMATCH:", line)
print(f"{len(mine)} of {len(theirs)} files of {full} are in {subset}, "
      f"{'all bitwise equal' if not bad else 'NOT all equal'}")
print(f"only in {full}: " + ", ".join(f for f in theirs if f not in mine))
sys.exit(1 if bad else 0)
