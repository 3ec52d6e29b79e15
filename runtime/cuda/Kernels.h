//===- runtime/cuda/Kernels.h - Launching the CUDA kernels ------*- C++ -*-===//
//
// Host functions that queue one kernel on a stream (Kernels.cu). They take
// plain pointers to device memory and the index plans of KernelBodies.h, and
// return the launch's cudaError_t as an int (0 = queued); nothing here
// synchronizes. Included by host C++20 code and by nvcc's C++17 alike, so
// it names no CUDA or LLVM type.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CUDA_KERNELS_H
#define REMAT_RUNTIME_CUDA_KERNELS_H

#include "runtime/cuda/KernelBodies.h"

#include <cstdint>

namespace remat::runtime::cuda {

/// A cudaStream_t.
using StreamHandle = void *;

/// Element types the device kernels compute in.
enum class ElemType : uint8_t { F32, F64, I64, I32, I8, U8 };

/// out[i] = op(in[i]) over \p count elements.
int launchUnary(StreamHandle stream, body::UnaryOp op, ElemType type,
                const void *in, void *out, int64_t count);

/// out = op(a, b) broadcast over \p space; \p a and \p b are laid out by
/// \p la and \p lb, \p out contiguous. Predicates write bool bytes.
int launchBinary(StreamHandle stream, body::BinaryOp op, ElemType type,
                 const void *a, const void *b, void *out,
                 const body::Dims &space, const body::Strides &la,
                 const body::Strides &lb);

/// out = cond ? x : y broadcast over \p space, elements of \p elementSize.
int launchWhere(StreamHandle stream, unsigned elementSize, const void *cond,
                const void *x, const void *y, void *out,
                const body::Dims &space, const body::Strides &lc,
                const body::Strides &lx, const body::Strides &ly);

/// Cast of \p count elements; \p toBool casts to bool bytes (then \p to is
/// ignored).
int launchCast(StreamHandle stream, ElemType from, ElemType to, bool toBool,
               const void *in, void *out, int64_t count);

/// out[offsetOf(space, lout, i)] = in[offsetOf(space, lin, i)] for every i
/// of \p space: Transpose, Slice, Expand, Concat and Split.
int launchStridedCopy(StreamHandle stream, unsigned elementSize,
                      const void *in, void *out, const body::Dims &space,
                      const body::Strides &lin, const body::Strides &lout);

/// Fills \p count elements of \p elementSize with the bytes at \p value.
int launchFill(StreamHandle stream, unsigned elementSize, const void *value,
               void *out, int64_t count);

/// Training-mode Dropout (f32 or f64); \p mask may be null.
int launchDropout(StreamHandle stream, ElemType type, const void *x, void *y,
                  uint8_t *mask, int64_t count, uint64_t key,
                  uint32_t threshold, double scale);

/// Softmax or LogSoftmax of x viewed as [outer, n, inner] along n.
int launchSoftmax(StreamHandle stream, ElemType type, bool isLog,
                  const void *x, void *y, int64_t outer, int64_t n,
                  int64_t inner);

/// remat.DropoutGrad over \p count elements (f32 or f64); \p scale is one
/// element in device memory.
int launchDropoutGrad(StreamHandle stream, ElemType type, const void *dy,
                      const uint8_t *mask, const void *scale, void *dx,
                      int64_t count);

/// remat.SoftmaxGrad of dy and y viewed as [outer, n, inner] along n.
int launchSoftmaxGrad(StreamHandle stream, ElemType type, const void *dy,
                      const void *y, void *dx, int64_t outer, int64_t n,
                      int64_t inner);

/// remat.LayerNormalizationGrad of \p rows rows of \p n (f32 or f64; Scale
/// has n elements, Mean and InvStdDev \p rows, all of X's dtype).
int launchLayerNormGrad(StreamHandle stream, ElemType type, const void *dy,
                        const void *x, const void *scale, const void *mean,
                        const void *invStdDev, void *dx, int64_t rows,
                        int64_t n);

/// LayerNormalization of \p rows rows of \p n; X is \p type (f32 or f64),
/// statistics computed in f64 when \p computeF64 and stored as \p statsType;
/// \p bias, \p mean and \p invStdDev may be null.
int launchLayerNorm(StreamHandle stream, ElemType type, bool computeF64,
                    ElemType statsType, const void *x, const void *scale,
                    const void *bias, void *y, void *mean, void *invStdDev,
                    int64_t rows, int64_t n, float epsilon);

/// SoftmaxCrossEntropyLoss: scores [batch, classes, spatial], labels (i64
/// when \p labelsI64, else i32) [batch, spatial]. \p losses receives the
/// per-element losses (the output for reduction "none", else workspace);
/// when \p reduced is not null it receives their sum, or mean when
/// \p mean. \p logProb and \p weights may be null. Labels out of range set
/// \p errorFlag to 1.
int launchCrossEntropy(StreamHandle stream, ElemType type, bool labelsI64,
                       const void *scores, const void *labels,
                       const void *weights, void *losses, void *logProb,
                       void *reduced, bool mean, int64_t batch,
                       int64_t classes, int64_t spatial, bool hasIgnore,
                       int64_t ignoreIndex, int *errorFlag);

/// remat.SoftmaxCrossEntropyGrad: out = (exp(logProb) - onehot(labels)) *
/// scale over logProb and out [batch, classes, spatial], labels (i64 when
/// \p labelsI64, else i32) and scale [batch, spatial].
int launchCrossEntropyGrad(StreamHandle stream, ElemType type, bool labelsI64,
                           const void *logProb, const void *labels,
                           const void *scale, void *out, int64_t batch,
                           int64_t classes, int64_t spatial);

/// ReduceSum/Mean/Max: one thread per output element of \p keptSpace.
int launchReduce(StreamHandle stream, body::ReduceOp op, ElemType type,
                 const void *x, void *out, const body::Dims &keptSpace,
                 const body::Strides &kept, const body::Dims &reducedSpace,
                 const body::Strides &reduced, int64_t reduceCount);

/// ArgMax (\p isMax) or ArgMin over the middle dim of \p x [outer, count,
/// inner] into i64 \p out [outer, inner]: one thread per output element.
int launchArgReduce(StreamHandle stream, bool isMax, bool last, ElemType type,
                    const void *x, void *out, int64_t outer, int64_t count,
                    int64_t inner);

/// Gather of data [outer, axisSize, inner] at \p count indices (i64 when
/// \p indicesI64) into out [outer, count, inner]. Indices out of range set
/// \p errorFlag to 1 (and give 0s).
int launchGather(StreamHandle stream, unsigned elementSize, bool indicesI64,
                 const void *data, const void *indices, void *out,
                 int64_t outer, int64_t axisSize, int64_t inner,
                 int64_t count, int *errorFlag);

/// Bytes of workspace launchScatter needs for \p count updates.
uint64_t scatterWorkspaceBytes(int64_t count);

/// ScatterElements: out = data, then each update written to its target
/// (none), or added / multiplied in update order ("add"/"mul", sorted by
/// target in \p workspace of scatterWorkspaceBytes(count) bytes). f32, f64,
/// i64 or i32 for add/mul; any element size for none.
int launchScatter(StreamHandle stream, ElemType type, unsigned elementSize,
                  int reduction, bool indicesI64, const void *data,
                  const void *indices, const void *updates, void *out,
                  int64_t dataCount, const body::Dims &updateSpace,
                  const int64_t *dataStrides, int axis, int64_t axisSize,
                  void *workspace, int *errorFlag);

//===----------------------------------------------------------------------===//
// Issue 13: Not, IsNaN, IsInf, Trilu, CumSum, GatherElements, Pad
//===----------------------------------------------------------------------===//

/// Not over \p count bool bytes.
int launchNot(StreamHandle stream, const void *in, void *out, int64_t count);

/// IsNaN (\p isInf false) or IsInf with its detect flags over \p count
/// f32/f64 elements, writing bool bytes.
int launchFloatClass(StreamHandle stream, ElemType type, bool isInf,
                     bool detectNegative, bool detectPositive, const void *in,
                     void *out, int64_t count);

/// Trilu over \p count elements of \p elementSize bytes, matrices of
/// \p rows x \p cols; \p k points to the i64 diagonal on the device, or is
/// null for 0.
int launchTrilu(StreamHandle stream, unsigned elementSize, const void *in,
                void *out, int64_t rows, int64_t cols, int64_t count,
                bool upper, const int64_t *k);

/// CumSum of x viewed as [outer, length, inner] along its middle dim.
int launchCumSum(StreamHandle stream, ElemType type, const void *x, void *y,
                 int64_t outer, int64_t length, int64_t inner, bool exclusive,
                 bool reverse);

/// GatherElements: \p count outputs of \p indexSpace, data of
/// \p dataStrides (row-major), gathered along \p axis of size \p axisSize.
/// Sets *errorFlag on an index out of range.
int launchGatherElements(StreamHandle stream, unsigned elementSize,
                         bool indicesI64, const void *data,
                         const void *indices, void *out,
                         const body::Dims &indexSpace,
                         const body::Strides &dataStrides, int axis,
                         int64_t axisSize, int64_t count, int *errorFlag);

/// Pad of the row-major \p inSpace into \p outSpace (\p begin per dim, in
/// Strides::strides); \p value points to the constant on the device, or is
/// null for zeros.
int launchPad(StreamHandle stream, unsigned elementSize, const void *in,
              void *out, const body::Dims &outSpace, const body::Dims &inSpace,
              const body::Strides &begin, body::PadMode mode,
              const void *value);

//===----------------------------------------------------------------------===//
// Issue 40: Clip, Tile, TopK (Ceil, Floor and Softplus are unary ops)
//===----------------------------------------------------------------------===//

/// Clip of \p count elements by the scalars at \p lo and \p hi on the
/// device (null: no bound).
int launchClip(StreamHandle stream, ElemType type, const void *in,
               const void *lo, const void *hi, void *out, int64_t count);

/// TopK of \p in [outer, count, inner] over the middle dim into \p values
/// (of \p type) and i64 \p indices [outer, k, inner]: one thread per input
/// element finds its place in the order (body::topKPlace).
int launchTopK(StreamHandle stream, ElemType type, const void *in, void *values,
               void *indices, int64_t outer, int64_t count, int64_t inner,
               int64_t k, bool largest);

/// Tile of the row-major \p inSpace into \p outSpace (each dim a multiple
/// of the input's).
int launchTile(StreamHandle stream, unsigned elementSize, const void *in,
               void *out, const body::Dims &outSpace,
               const body::Dims &inSpace);

/// Conv or ConvTranspose (\p shape.transpose) of f32/f64 \p x by \p w plus
/// \p bias (or null) into \p count result elements.
int launchConv(StreamHandle stream, ElemType type, const void *x,
               const void *w, const void *bias, void *y,
               const body::ConvShape &shape, int64_t count);

/// MaxPool (\p max) or AveragePool of f32/f64 \p x into \p count result
/// elements.
int launchPool(StreamHandle stream, ElemType type, const void *x, void *y,
               const body::PoolShape &shape, bool max, int64_t count);

/// remat.MaxPoolGrad (\p x the pooled input) or remat.AveragePoolGrad (\p x
/// null) of \p dy into \p count elements of dx.
int launchPoolGrad(StreamHandle stream, ElemType type, const void *dy,
                   const void *x, void *dx, const body::PoolShape &shape,
                   int64_t count);

} // namespace remat::runtime::cuda

#endif // REMAT_RUNTIME_CUDA_KERNELS_H
