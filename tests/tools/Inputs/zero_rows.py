"""zero_rows.py PLAIN PADDED FILE: which rows of FILE (a 2-D TensorProto) are all zeros in each
of two dump folders, and whether every other file of PLAIN is bitwise equal in PADDED."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

plain, padded, name = sys.argv[1:4]
tensors = {}
for label, folder in (("plain", plain), ("padded", padded)):
    rows = tensors[label] = numpy_helper.to_array(onnx.load_tensor(os.path.join(folder, name)))
    print(f"{label}: {name} " + ", ".join(
        f"row {i} {'zero' if not np.any(r) else 'nonzero'}" for i, r in enumerate(rows)))
print("rows bitwise equal in both: " + ", ".join(
    str(i) for i, (a, b) in enumerate(zip(tensors["plain"], tensors["padded"]))
    if a.tobytes() == b.tobytes()))
others = [f for f in sorted(os.listdir(plain)) if f not in (name, "index.json")]
same = [f for f in others if os.path.exists(os.path.join(padded, f)) and
        open(os.path.join(plain, f), "rb").read() == open(os.path.join(padded, f), "rb").read()]
print(f"{len(same)} other files bitwise equal" + (
    "" if len(same) == len(others) else f"; DIFFERENT: {sorted(set(others) - set(same))}"))
