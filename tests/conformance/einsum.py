#!/usr/bin/env python3
"""ctest's conformance.einsum: remat's lowering of Einsum against numpy.einsum.

Writes one case per equation below in the layout of ONNX's node tests
(<case>/model.onnx, <case>/test_data_set_0/{input,output}_<i>.pb; f64 inputs
drawn from a fixed seed, the output from numpy.einsum) and runs
remat-conformance over them, which compares as ONNX's runner does. The
equations are those of the Hugging Face models that export Einsum (FalconH1,
Funnel, LED, Longformer, LongT5, PegasusX, ProphetNet, XLNet), and the forms
numpy allows that they do not use: implicit output, ellipses of different
lengths, broadcasting, one and three operands, spaces. The cases remat
refuses are listed with the error they must give (written to
<work-dir>/unsupported.txt).

Exits 77 (ctest: skipped) without the onnx package, unless
REMAT_REQUIRE_REFERENCE=1.
"""

import argparse
import os
import shutil
import subprocess
import sys

# (name, equation, operand shapes)
CASES = [
    # FalconH1 (Mamba2's chunked scan)
    ("falconh1_states", "bclhn,bchpn->bclhp", [(2, 2, 3, 2, 4), (2, 2, 2, 5, 4)]),
    ("falconh1_decay", "bclhn,bclhp->bchpn", [(2, 2, 3, 2, 4), (2, 2, 3, 2, 5)]),
    ("falconh1_scores", "bclhn,bcshn->bclsh", [(1, 2, 3, 2, 4), (1, 2, 3, 2, 4)]),
    ("falconh1_chunk", "bzch,bzhpn->bchpn", [(2, 3, 3, 2), (2, 3, 2, 4, 5)]),
    # Funnel (relative attention)
    ("funnel_content", "bind,bjnd->bnij", [(2, 3, 2, 4), (2, 5, 2, 4)]),
    ("funnel_position", "bind,jd->bnij", [(2, 3, 2, 4), (5, 4)]),
    ("funnel_segment", "bind,snd->bnis", [(2, 3, 2, 4), (2, 2, 4)]),
    ("funnel_post", "bnij,bjnd->bind", [(2, 2, 3, 5), (2, 5, 2, 4)]),
    ("funnel_proj", "td,dnh->tnh", [(3, 4), (4, 2, 5)]),
    ("funnel_out", "binh,dnh->bind", [(2, 3, 2, 5), (4, 2, 5)]),
    # LED / Longformer (sliding chunks)
    ("longformer_chunks", "bcxd,bcyd->bcxy", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("longformer_values", "bcwd,bcdh->bcwh", [(2, 3, 4, 5), (2, 3, 5, 6)]),
    ("longformer_global", "blhd,bshd->blhs", [(2, 3, 2, 4), (2, 5, 2, 4)]),
    # LongT5 (ellipses)
    ("longt5_scores", "...qhd,...khd->...hqk", [(2, 3, 4, 2, 5), (2, 3, 6, 2, 5)]),
    ("longt5_values", "...hqk,...khd->...qhd", [(2, 3, 2, 4, 6), (2, 3, 6, 2, 5)]),
    ("longt5_global", "...nd,...ng->...gd", [(2, 4, 3), (2, 4, 5)]),
    # PegasusX (capital subscripts)
    ("pegasusx_blocks", "BHNKF,BHNXF->BHNKX", [(2, 2, 3, 4, 5), (2, 2, 3, 6, 5)]),
    ("pegasusx_global", "BHNKF,BHGF->BHNKG", [(2, 2, 3, 4, 5), (2, 2, 6, 5)]),
    ("pegasusx_mix", "BHNKG,BHGF->BHNKF", [(2, 2, 3, 4, 6), (2, 2, 6, 5)]),
    # ProphetNet
    ("prophetnet_ngram", "bnhtc,bnhsc->bnhts", [(2, 2, 3, 4, 5), (2, 2, 3, 6, 5)]),
    ("prophetnet_matmul", "bsij,bsjk->bsik", [(2, 3, 4, 5), (2, 3, 5, 6)]),
    # XLNet
    ("xlnet_proj", "ibh,hnd->ibnd", [(3, 2, 6), (6, 2, 4)]),
    ("xlnet_out", "ibnd,hnd->ibh", [(3, 2, 2, 4), (6, 2, 4)]),
    ("xlnet_ac", "ibnd,jbnd->bnij", [(3, 2, 2, 4), (5, 2, 2, 4)]),
    ("xlnet_ef", "ijbs,ibns->bnij", [(3, 5, 2, 2), (3, 2, 2, 2)]),
    ("xlnet_attn_vec", "bnij,jbnd->ibnd", [(2, 2, 3, 5), (5, 2, 2, 4)]),
    ("xlnet_transpose", "bnij->ijbn", [(2, 3, 4, 5)]),
    ("xlnet_rel_shift", "lbnd,mlb->mbnd", [(3, 2, 2, 4), (5, 3, 2)]),
    # Forms the models do not use.
    ("implicit_matmul", "ij,jk", [(3, 4), (4, 5)]),
    ("implicit_order", "ba", [(3, 4)]),
    ("implicit_ellipsis", "...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("implicit_case_order", "bA,Ac", [(3, 4), (4, 5)]),
    ("ellipsis_lengths", "...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 5)]),
    ("ellipsis_middle", "a...b,b...c->a...c", [(2, 3, 4), (4, 3, 5)]),
    ("broadcast_one", "bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("inner_to_scalar", "ij,ij->", [(3, 4), (3, 4)]),
    ("sum_all", "ij->", [(3, 4)]),
    ("sum_one_side", "ij,jk->k", [(3, 4), (4, 5)]),
    ("identity", "ij->ij", [(3, 4)]),
    ("three_chain", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("three_shared", "bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 5)]),
    ("three_late_sum", "ab,cd,bd->ac", [(2, 3), (4, 5), (3, 5)]),
    ("spaces", " bij , bjk -> bik ", [(2, 3, 4), (2, 4, 5)]),
    ("empty_dim", "bij,bjk->bik", [(2, 0, 4), (2, 4, 5)]),
]

# (name, equation, operand shapes, the error remat must give)
REFUSED = [
    ("refused_diagonal", "ii->i", [(3, 3)],
     "subscript 'i' is repeated within term 0 'ii' (a trace or a diagonal)"),
    ("refused_sizes", "ij,jk->ik", [(3, 4), (5, 6)],
     "subscript 'j' is 4 in one input and 5 in input 1"),
    ("refused_no_ellipsis", "...ij->ij", [(2, 3, 4)],
     "the inputs' '...' stands for 1 dims and the output 'ij' has no '...'"),
    ("refused_unknown_output", "ij->ik", [(3, 4)],
     "the output's subscript 'k' is in no input"),
    ("refused_rank", "ijk->i", [(3, 4)],
     "term 0 'ijk' has 3 subscripts for input 0 of rank 2"),
]


def write_case(out_dir, name, equation, shapes, rng, onnx, helper,
               numpy_helper, np, expect_output=True):
    inputs = [rng.uniform(-1, 1, size=shape) for shape in shapes]
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    y = np.einsum(equation.replace(" ", ""), *inputs) if expect_output \
        else None
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, onnx.TensorProto.DOUBLE, s)
         for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    case = os.path.join(out_dir, "einsum_" + name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data)
    onnx.save(model, os.path.join(case, "model.onnx"))
    for i, (n, value) in enumerate(zip(names, inputs)):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, n).SerializeToString())
    if y is not None:
        with open(os.path.join(data, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(y, dtype=np.float64),
                                            "y").SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conformance", required=True,
                        help="the remat-conformance executable")
    parser.add_argument("--work-dir", required=True,
                        help="where to write the cases (replaced)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from run import onnx_missing
    missing = onnx_missing()
    if missing is not None:
        return missing
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    rng = np.random.default_rng(20261203)
    for name, equation, shapes in CASES:
        write_case(args.work_dir, name, equation, shapes, rng, onnx, helper,
                   numpy_helper, np)
    unsupported = os.path.join(args.work_dir, "unsupported.txt")
    with open(unsupported, "w") as f:
        for name, equation, shapes, error in REFUSED:
            write_case(args.work_dir, name, equation, shapes, rng, onnx,
                       helper, numpy_helper, np, expect_output=False)
            f.write(f"einsum_{name}: refused [error: {error}]\n")
    sys.stdout.flush()
    run = subprocess.run([args.conformance, "--unsupported", unsupported,
                          args.work_dir])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
