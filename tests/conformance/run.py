#!/usr/bin/env python3
"""ctest's conformance.onnx_node: generates ONNX's node test cases for the ops
remat supports (generate.py) and runs remat-conformance over all of them.

Exits 77 (ctest: skipped) when the onnx package is not installed, else with
remat-conformance's exit code.
"""

import argparse
import os
import subprocess
import sys


def onnx_missing():
    """None when the onnx package imports, else the exit code: 77 (skipped),
    or 1 under REMAT_REQUIRE_REFERENCE=1."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        if os.environ.get("REMAT_REQUIRE_REFERENCE", "0") == "1":
            print("error: the onnx Python package is not installed and "
                  "REMAT_REQUIRE_REFERENCE=1 (run scripts/setup.sh)")
            return 1
        print("SKIPPED: onnx Python package not installed")
        return 77
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conformance", required=True,
                        help="the remat-conformance executable")
    parser.add_argument("--ops-def", required=True, help="ir/Ops.def")
    parser.add_argument("--unsupported", required=True,
                        help="tests/conformance/unsupported.txt")
    parser.add_argument("--work-dir", required=True,
                        help="where to write the cases (replaced)")
    args = parser.parse_args()
    missing = onnx_missing()
    if missing is not None:
        return missing

    here = os.path.dirname(os.path.abspath(__file__))
    generate = subprocess.run(
        [sys.executable, os.path.join(here, "generate.py"),
         "--ops-def", args.ops_def, "-o", args.work_dir])
    if generate.returncode != 0:
        print(f"error: generate.py exited with {generate.returncode}")
        return 1
    sys.stdout.flush()
    run = subprocess.run([args.conformance, "--unsupported", args.unsupported,
                          args.work_dir])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
