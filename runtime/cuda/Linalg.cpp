//===- runtime/cuda/Linalg.cpp - MatMul and Gemm on cuBLAS ----------------===//
//
// Row-major products as cuBLAS's column-major ones (C^T = B^T A^T), one
// strided-batched call where the batch offsets allow it.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

namespace remat::runtime::cuda::detail {

MaybeRunner selectMatMul(const ir::Node &node, bool allowTF32) {
  ir::DType dtype = node.getResult(0)->getType().getDType();
  if (!isFloatType(dtype))
    return std::nullopt;
  // 1-D operands as [1, K] and [K, 1]; batch dims padded with 1s in front.
  ArrayRef<int64_t> ad = node.getOperand(0)->getType().getDims();
  ArrayRef<int64_t> bd = node.getOperand(1)->getType().getDims();
  int64_t m = ad.size() == 1 ? 1 : ad[ad.size() - 2], k = ad.back();
  int64_t n = bd.size() == 1 ? 1 : bd.back();
  size_t aRank = ad.size() > 2 ? ad.size() - 2 : 0;
  size_t bRank = bd.size() > 2 ? bd.size() - 2 : 0;
  size_t rank = std::max(aRank, bRank);
  std::vector<int64_t> aBatch(rank, 1), bBatch(rank, 1);
  for (size_t d = 0; d < aRank; ++d)
    aBatch[rank - aRank + d] = ad[d];
  for (size_t d = 0; d < bRank; ++d)
    bBatch[rank - bRank + d] = bd[d];
  std::vector<int64_t> outBatch(rank);
  for (size_t d = 0; d < rank; ++d)
    outBatch[d] = std::max(aBatch[d], bBatch[d]);
  // Per output batch element, the offsets of its A and B matrices.
  std::vector<int64_t> aOff, bOff;
  int64_t batches = 1;
  for (int64_t d : outBatch)
    batches *= d;
  std::vector<int64_t> aStr = rowMajor(aBatch), bStr = rowMajor(bBatch);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rest = i, ao = 0, bo = 0;
    for (size_t d = rank; d > 0; --d) {
      int64_t idx = rest % outBatch[d - 1];
      rest /= outBatch[d - 1];
      ao += (aBatch[d - 1] == 1 ? 0 : idx) * aStr[d - 1];
      bo += (bBatch[d - 1] == 1 ? 0 : idx) * bStr[d - 1];
    }
    aOff.push_back(ao * m * k);
    bOff.push_back(bo * k * n);
  }
  // One strided-batched call when the offsets are arithmetic progressions.
  auto stride = [&](const std::vector<int64_t> &offs) -> std::optional<int64_t> {
    if (offs.size() < 2)
      return 0;
    int64_t s = offs[1] - offs[0];
    for (size_t i = 1; i < offs.size(); ++i)
      if (offs[i] - offs[i - 1] != s)
        return std::nullopt;
    return s;
  };
  std::optional<int64_t> sa = stride(aOff), sb = stride(bOff);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return std::nullopt;
  bool isF64 = dtype == ir::DType::F64;
  return Runner([&node, m, n, k, batches, sa, sb, aOff, bOff, isF64,
                 allowTF32](const RunContext &ctx, ArrayRef<Tensor> in,
                            ArrayRef<Tensor> out) -> Error {
    gCublas.setMathMode(ctx.cublas, allowTF32 && !isF64
                                      ? CUBLAS_TF32_TENSOR_OP_MATH
                                      : CUBLAS_DEFAULT_MATH);
    if (batches == 0 || m == 0 || n == 0)
      return Error::success();
    size_t elem = isF64 ? 8 : 4;
    const char *A = static_cast<const char *>(in[0].getData());
    const char *B = static_cast<const char *>(in[1].getData());
    char *C = static_cast<char *>(out[0].getData());
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto gemm = [&](const char *a, const char *b, char *c, long long strideA,
                    long long strideB, int count) -> cublasStatus_t {
      if (isF64) {
        const double one = 1, zero = 0;
        return gCublas.dgemmStridedBatched(
            ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one,
            reinterpret_cast<const double *>(b), int(n), strideB,
            reinterpret_cast<const double *>(a), int(k), strideA, &zero,
            reinterpret_cast<double *>(c), int(n), (long long)(m * n), count);
      }
      const float one = 1, zero = 0;
      return gCublas.sgemmStridedBatched(
          ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one,
          reinterpret_cast<const float *>(b), int(n), strideB,
          reinterpret_cast<const float *>(a), int(k), strideA, &zero,
          reinterpret_cast<float *>(c), int(n), (long long)(m * n), count);
    };
    if (k == 0) {
      if (cudaError_t err = cudaMemsetAsync(C, 0, out[0].getByteSize(),
                                            ctx.device.getStream()))
        return cudaError(err, "zeroing an empty product");
      return Error::success();
    }
    if (sa && sb && batches <= INT32_MAX) {
      if (cublasStatus_t s = gemm(A, B, C, *sa, *sb, int(batches)))
        return cublasError(s, node.describe() + ": cublas gemm");
      return Error::success();
    }
    for (int64_t i = 0; i < batches; ++i)
      if (cublasStatus_t s = gemm(A + aOff[i] * elem, B + bOff[i] * elem,
                                  C + i * m * n * elem, 0, 0, 1))
        return cublasError(s, node.describe() + ": cublas gemm");
    return Error::success();
  });
}

MaybeRunner selectGemm(const ir::Node &node, bool allowTF32) {
  ir::DType dtype = node.getResult(0)->getType().getDType();
  if (!isFloatType(dtype))
    return std::nullopt;
  const ir::AttrList &attrs = node.getAttrs();
  bool transA = attrs.getInt("transA").value_or(0) != 0;
  bool transB = attrs.getInt("transB").value_or(0) != 0;
  double alpha = attrs.getFloat("alpha").value_or(1.0f);
  double beta = attrs.getFloat("beta").value_or(1.0f);
  ArrayRef<int64_t> ad = node.getOperand(0)->getType().getDims();
  ArrayRef<int64_t> bd = node.getOperand(1)->getType().getDims();
  int64_t m = transA ? ad[1] : ad[0], k = transA ? ad[0] : ad[1];
  int64_t n = transB ? bd[0] : bd[1];
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return std::nullopt;
  bool hasC = node.getNumOperands() == 3 && beta != 0;
  CopyPlan cPlan;
  if (hasC) {
    ArrayRef<int64_t> outDims = node.getResult(0)->getType().getDims();
    cPlan.space = toDims(outDims);
    cPlan.in = broadcastStrides(node.getOperand(2)->getType().getDims(),
                                outDims);
    cPlan.out = contiguous(outDims);
    cPlan.operand = 2;
  }
  bool isF64 = dtype == ir::DType::F64;
  return Runner([&node, m, n, k, transA, transB, alpha, beta, hasC, cPlan,
                 isF64, allowTF32](const RunContext &ctx, ArrayRef<Tensor> in,
                                   ArrayRef<Tensor> out) -> Error {
    gCublas.setMathMode(ctx.cublas, allowTF32 && !isF64
                                      ? CUBLAS_TF32_TENSOR_OP_MATH
                                      : CUBLAS_DEFAULT_MATH);
    if (m == 0 || n == 0)
      return Error::success();
    if (hasC) {
      if (auto err = launched(launchStridedCopy(ctx.device.getStream(),
                                                isF64 ? 8 : 4, in[2].getData(),
                                                out[0].getData(), cPlan.space,
                                                cPlan.in, cPlan.out),
                              node))
        return err;
    }
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = int(transA ? m : k), ldb = int(transB ? k : n);
    double b = hasC ? beta : 0;
    if (k == 0 && !hasC) {
      if (cudaError_t err = cudaMemsetAsync(out[0].getData(), 0,
                                            out[0].getByteSize(),
                                            ctx.device.getStream()))
        return cudaError(err, "zeroing an empty product");
      return Error::success();
    }
    cublasStatus_t s;
    if (isF64) {
      s = gCublas.dgemm(ctx.cublas, opB, opA, int(n), int(m), int(k), &alpha,
                      static_cast<const double *>(in[1].getData()), ldb,
                      static_cast<const double *>(in[0].getData()), lda, &b,
                      static_cast<double *>(out[0].getData()), int(n));
    } else {
      float af = float(alpha), bf = float(b);
      s = gCublas.sgemm(ctx.cublas, opB, opA, int(n), int(m), int(k), &af,
                      static_cast<const float *>(in[1].getData()), ldb,
                      static_cast<const float *>(in[0].getData()), lda, &bf,
                      static_cast<float *>(out[0].getData()), int(n));
    }
    if (s)
      return cublasError(s, node.describe() + ": cublas gemm");
    return Error::success();
  });
}

} // namespace remat::runtime::cuda::detail
