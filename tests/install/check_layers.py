"""Checks that libremat.so does not carry the tools' layer (issue 36): no
symbol of driver/ (remat::driver::: the tools' llvm::cl flags, their SVG
plots, remat-sweep's remat-run processes); and that neither session/ nor
api/ includes a driver/ header, the include rule that keeps it so.

LLVM Support's own machinery stays: llvm::Error reaches ErrorHandling.cpp,
which reaches Signals.cpp, which declares LLVM's own llvm::cl options (so
CommandLine.cpp and Program.cpp are linked too). Those options are
ManagedStatics, registered only when LLVM code reads them, and none is
exported; they are not remat's and are not checked here.

    python3 tests/install/check_layers.py LIBREMAT_SO ROOT
"""
import pathlib
import re
import subprocess
import sys

library, root = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []

# What only the tools may link: everything in their namespace.
forbidden = re.compile(r"remat::driver::")
symbols = subprocess.run(["nm", "-C", library], check=True,
                         capture_output=True, text=True).stdout
hits = [line.split(" ", 2)[-1] for line in symbols.splitlines()
        if forbidden.search(line)]
if hits:
    failures.append(f"{library}: {len(hits)} symbols of the tools' layer, "
                    f"e.g. {hits[0]}")

include = re.compile(r'#include "driver/')
for folder in ("session", "api"):
    for path in sorted((root / folder).rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if include.match(line):
                failures.append(f"{path.relative_to(root)}:{number}: "
                                f"{folder}/ includes a driver/ header")

for failure in failures:
    print("error: " + failure)
sys.exit(1 if failures else 0)
