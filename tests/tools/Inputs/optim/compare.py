#!/usr/bin/env python3
"""compare.py DUMP_DIR CFG: checks DUMP_DIR/<w>_new.pb against ref_CFG_<w>.pb
within 1e-5 relative (max |remat - ref| <= 1e-5 * max |ref|, per weight) and
that every weight moved from its initial value by more than that."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


def main():
    dump, cfg = sys.argv[1], sys.argv[2]
    ok = True
    for n in ["w1", "b1", "w2"]:
        got = load(os.path.join(dump, n + "_new.pb"))
        ref = load(os.path.join(HERE, "ref_%s_%s.pb" % (cfg, n)))
        init = load(os.path.join(HERE, n + ".pb"))
        scale = np.abs(ref).max()
        rel = np.abs(got - ref).max() / scale
        moved = np.abs(ref - init).max() / scale
        good = rel <= 1e-5 and moved > 1e-3
        ok &= good
        print("%s %s: relative difference %.2e, moved %.2e: %s"
              % (cfg, n, rel, moved, "ok" if good else "MISMATCH"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
