//===- runtime/cpu/DataMovement.cpp - Kernels that move elements ----------===//
//
// Reshape, Squeeze, Unsqueeze and Identity copy bytes (nothing when the
// executor gives the result the operand's memory). Transpose, Slice and
// Expand are one strided copy: contiguous rows become memcpy, a transposed
// innermost dim goes through 32x32 tiles. Gather, Concat and Split copy rows.
// ScatterElements applies updates in row-major order of the updates tensor
// (threads take disjoint fibers, so "add" and "mul" sum in a fixed order).
// Shape, Constant, ConstantOfShape, Range and OneHot produce data.
//
// These kernels work on every dtype: they move elements by size.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelImpl.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace remat::runtime::cpu::detail {

//===----------------------------------------------------------------------===//
// Shared copies
//===----------------------------------------------------------------------===//

void copyTensorBytes(const Tensor &in, const Tensor &out) {
  assert(in.getByteSize() == out.getByteSize() && "copy between sizes");
  if (in.getData() == out.getData() || out.getByteSize() == 0)
    return;
  std::memcpy(out.getData(), in.getData(), out.getByteSize());
}

void copyTensorBytes(const Tensor &in, const Tensor &out,
                     ParallelFor &parallel) {
  assert(in.getByteSize() == out.getByteSize() && "copy between sizes");
  if (in.getData() == out.getData() || out.getByteSize() == 0)
    return;
  constexpr int64_t kBlock = 256 * 1024;
  int64_t bytes = out.getByteSize();
  auto *target = static_cast<char *>(out.getData());
  const auto *source = static_cast<const char *>(in.getData());
  parallel.run(
      (bytes + kBlock - 1) / kBlock, 4, [&](int64_t begin, int64_t end) {
        int64_t first = begin * kBlock, last = std::min(bytes, end * kBlock);
        std::memcpy(target + first, source + first, size_t(last - first));
      });
}

StridedCopyPlan makeStridedCopyPlan(ArrayRef<int64_t> outDims,
                                    ArrayRef<int64_t> inStrides, int64_t base,
                                    unsigned elementSize) {
  assert(outDims.size() == inStrides.size());
  StridedCopyPlan plan;
  plan.base = base;
  plan.elementSize = elementSize;
  plan.numElements = product(outDims);
  for (size_t d = 0; d < outDims.size(); ++d) {
    if (outDims[d] == 1)
      continue;
    if (!plan.dims.empty() &&
        plan.strides.back() == inStrides[d] * outDims[d]) {
      plan.dims.back() *= outDims[d];
      plan.strides.back() = inStrides[d];
      continue;
    }
    plan.dims.push_back(outDims[d]);
    plan.strides.push_back(inStrides[d]);
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(plan.numElements);
    plan.strides.push_back(0);
  }
  return plan;
}

namespace {

constexpr int64_t kCopyGrainElements = 64 * 1024;
constexpr int64_t kTile = 32;

/// \returns the input offset (without base) of outer row \p row, the rows
/// being the output dims but the last.
int64_t rowOffset(const StridedCopyPlan &plan, int64_t row) {
  int64_t offset = 0;
  for (size_t d = plan.dims.size() - 1; d > 0; --d) {
    offset += (row % plan.dims[d - 1]) * plan.strides[d - 1];
    row /= plan.dims[d - 1];
  }
  return offset;
}

template <typename T>
void stridedCopy(const StridedCopyPlan &plan, const T *in, T *out,
                 ParallelFor &parallel) {
  size_t rank = plan.dims.size();
  int64_t inner = plan.dims.back();
  int64_t innerStride = plan.strides.back();
  int64_t rows = inner == 0 ? 0 : plan.numElements / inner;
  in += plan.base;

  // A transposed innermost dim: find the output dim that walks the input
  // contiguously and copy 32x32 tiles of (that dim, the last dim).
  size_t q = rank;
  if (innerStride != 1 && innerStride != 0 && inner >= 8)
    for (size_t d = 0; d + 1 < rank; ++d)
      if (plan.strides[d] == 1 && plan.dims[d] >= 8)
        q = d;
  if (q < rank) {
    Dims outStrides = rowMajorStrides(plan.dims);
    // The other dims, with their input and output strides.
    Dims otherDims, otherIn, otherOut;
    for (size_t d = 0; d + 1 < rank; ++d) {
      if (d == q)
        continue;
      otherDims.push_back(plan.dims[d]);
      otherIn.push_back(plan.strides[d]);
      otherOut.push_back(outStrides[d]);
    }
    int64_t others = product(otherDims);
    int64_t qSize = plan.dims[q], qOut = outStrides[q];
    int64_t qTiles = (qSize + kTile - 1) / kTile;
    int64_t lTiles = (inner + kTile - 1) / kTile;
    parallel.run(others * qTiles,
                 std::max<int64_t>(1, kCopyGrainElements / (kTile * inner)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t task = begin; task < end; ++task) {
                     int64_t other = task / qTiles;
                     int64_t q0 = (task % qTiles) * kTile;
                     int64_t inOffset = 0, outOffset = 0;
                     for (size_t d = otherDims.size(); d > 0; --d) {
                       int64_t i = other % otherDims[d - 1];
                       other /= otherDims[d - 1];
                       inOffset += i * otherIn[d - 1];
                       outOffset += i * otherOut[d - 1];
                     }
                     int64_t qCount = std::min(kTile, qSize - q0);
                     for (int64_t lt = 0; lt < lTiles; ++lt) {
                       int64_t l0 = lt * kTile;
                       int64_t lCount = std::min(kTile, inner - l0);
                       for (int64_t i = 0; i < qCount; ++i) {
                         const T *src =
                             in + inOffset + (q0 + i) + l0 * innerStride;
                         T *dst = out + outOffset + (q0 + i) * qOut + l0;
                         for (int64_t j = 0; j < lCount; ++j)
                           dst[j] = src[j * innerStride];
                       }
                     }
                   }
                 });
    return;
  }

  parallel.run(
      rows,
      std::max<int64_t>(1, kCopyGrainElements / std::max<int64_t>(inner, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const T *src = in + rowOffset(plan, row);
          T *dst = out + row * inner;
          if (innerStride == 1) {
            std::memcpy(dst, src, inner * sizeof(T));
          } else if (innerStride == 0) {
            std::fill(dst, dst + inner, *src);
          } else {
            for (int64_t j = 0; j < inner; ++j)
              dst[j] = src[j * innerStride];
          }
        }
      });
}

} // namespace

void runStridedCopy(const StridedCopyPlan &plan, const void *in, void *out,
                    ParallelFor &parallel) {
  if (plan.numElements == 0)
    return;
  dispatchBySize(plan.elementSize, [&](auto tag) {
    using T = decltype(tag);
    stridedCopy<T>(plan, static_cast<const T *>(in), static_cast<T *>(out),
                   parallel);
  });
}

namespace {

Kernel copyKernel() {
  return [](const KernelContext &ctx) -> Error {
    copyTensorBytes(ctx.inputs[0], ctx.outputs[0], ctx.parallel);
    return Error::success();
  };
}

//===----------------------------------------------------------------------===//
// Reshape, Squeeze, Unsqueeze
//===----------------------------------------------------------------------===//

/// \returns the dims ONNX Reshape gives \p inDims for \p shape, or an error.
Expected<Dims> reshapeDims(const ir::Node &node, ArrayRef<int64_t> inDims,
                           ArrayRef<int64_t> shape, bool allowZero) {
  Dims dims;
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t dim = shape[i];
    if (dim == -1 && !inferred) {
      inferred = i;
      dims.push_back(1);
      continue;
    }
    if (dim == 0 && !allowZero) {
      if (i >= inDims.size())
        return nodeError(node, "shape " + dimsStr(shape) + " copies dim " +
                                   Twine(i) + " of a rank-" +
                                   Twine(inDims.size()) + " operand");
      dim = inDims[i];
    }
    if (dim < 0)
      return nodeError(node, "shape " + dimsStr(shape) + " has invalid dim " +
                                 Twine(shape[i]));
    dims.push_back(dim);
    known *= dim;
  }
  if (inferred) {
    int64_t count = product(inDims);
    if (known == 0 || count % known != 0)
      return nodeError(node, "shape " + dimsStr(shape) +
                                 " leaves no size for -1 with " + Twine(count) +
                                 " elements");
    dims[*inferred] = count / known;
  }
  return dims;
}

Kernel reshapeKernel(bool allowZero) {
  return [allowZero](const KernelContext &ctx) -> Error {
    std::vector<int64_t> shape = readInts(ctx.inputs[1]);
    auto dims =
        reshapeDims(ctx.node, ctx.inputs[0].getDims(), shape, allowZero);
    if (!dims)
      return dims.takeError();
    if (auto err = checkRuntimeDims(ctx.node, "shape " + dimsStr(shape), *dims,
                                    ctx.outputs[0].getDims()))
      return err;
    copyTensorBytes(ctx.inputs[0], ctx.outputs[0], ctx.parallel);
    return Error::success();
  };
}

/// \returns the normalized \p axes for \p rank, or an error for an axis out
/// of range or named twice.
Expected<llvm::SmallVector<bool, 6>>
axisSet(const ir::Node &node, ArrayRef<int64_t> axes, int64_t rank) {
  llvm::SmallVector<bool, 6> set(rank, false);
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank)
      return nodeError(node, "axes " + dimsStr(axes) + " has axis " +
                                 Twine(axis) + " outside [" + Twine(-rank) +
                                 ", " + Twine(rank) + ")");
    int64_t normalized = axis < 0 ? axis + rank : axis;
    if (set[normalized])
      return nodeError(node, "axes " + dimsStr(axes) + " names axis " +
                                 Twine(normalized) + " twice");
    set[normalized] = true;
  }
  return set;
}

Kernel unsqueezeKernel() {
  return [](const KernelContext &ctx) -> Error {
    std::vector<int64_t> axes = readInts(ctx.inputs[1]);
    ArrayRef<int64_t> inDims = ctx.inputs[0].getDims();
    int64_t rank = static_cast<int64_t>(inDims.size() + axes.size());
    auto inserted = axisSet(ctx.node, axes, rank);
    if (!inserted)
      return inserted.takeError();
    Dims dims;
    size_t next = 0;
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back((*inserted)[d] ? 1 : inDims[next++]);
    if (auto err = checkRuntimeDims(ctx.node, "axes " + dimsStr(axes), dims,
                                    ctx.outputs[0].getDims()))
      return err;
    copyTensorBytes(ctx.inputs[0], ctx.outputs[0], ctx.parallel);
    return Error::success();
  };
}

Kernel squeezeKernel() {
  return [](const KernelContext &ctx) -> Error {
    std::vector<int64_t> axes = readInts(ctx.inputs[1]);
    ArrayRef<int64_t> inDims = ctx.inputs[0].getDims();
    auto removed = axisSet(ctx.node, axes, inDims.size());
    if (!removed)
      return removed.takeError();
    Dims dims;
    for (size_t d = 0; d < inDims.size(); ++d) {
      if (!(*removed)[d]) {
        dims.push_back(inDims[d]);
        continue;
      }
      if (inDims[d] != 1)
        return nodeError(ctx.node, "cannot squeeze dim " + Twine(d) +
                                       " of size " + Twine(inDims[d]));
    }
    if (auto err = checkRuntimeDims(ctx.node, "axes " + dimsStr(axes), dims,
                                    ctx.outputs[0].getDims()))
      return err;
    copyTensorBytes(ctx.inputs[0], ctx.outputs[0], ctx.parallel);
    return Error::success();
  };
}

//===----------------------------------------------------------------------===//
// Transpose, Expand, Slice
//===----------------------------------------------------------------------===//

Kernel stridedCopyKernel(StridedCopyPlan plan) {
  return [plan = std::move(plan)](const KernelContext &ctx) -> Error {
    runStridedCopy(plan, ctx.inputs[0].getData(), ctx.outputs[0].getData(),
                   ctx.parallel);
    return Error::success();
  };
}

Kernel selectTranspose(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  unsigned rank = type.getRank();
  std::vector<int64_t> perm;
  if (auto given = node.getAttrs().getInts("perm"))
    perm = *given;
  else
    for (unsigned i = 0; i < rank; ++i)
      perm.push_back(rank - 1 - i);
  Dims inStrides = rowMajorStrides(type.getDims());
  Dims outDims, strides;
  for (int64_t axis : perm) {
    outDims.push_back(type.getDim(axis));
    strides.push_back(inStrides[axis]);
  }
  return stridedCopyKernel(
      makeStridedCopyPlan(outDims, strides, 0, ir::dtypeSize(type.getDType())));
}

Kernel selectExpand(const ir::Node &node) {
  const ir::TensorType &inType = node.getOperand(0)->getType();
  ArrayRef<int64_t> outDims = node.getResult(0)->getType().getDims();
  // Broadcast strides: 0 where the operand has size 1 or no dim.
  Dims inStrides = rowMajorStrides(inType.getDims());
  Dims strides(outDims.size(), 0);
  size_t lead = outDims.size() - inType.getRank();
  for (size_t d = 0; d < inType.getRank(); ++d)
    strides[lead + d] = inType.getDim(d) == 1 ? 0 : inStrides[d];
  StridedCopyPlan plan = makeStridedCopyPlan(outDims, strides, 0,
                                             ir::dtypeSize(inType.getDType()));
  return [plan](const KernelContext &ctx) -> Error {
    std::vector<int64_t> shape = readInts(ctx.inputs[1]);
    // numpy broadcasting of the operand's dims and the shape operand.
    ArrayRef<int64_t> inDims = ctx.inputs[0].getDims();
    size_t rank = std::max(inDims.size(), shape.size());
    Dims dims(rank);
    for (size_t i = 0; i < rank; ++i) {
      int64_t a =
          i < rank - inDims.size() ? 1 : inDims[i - (rank - inDims.size())];
      int64_t b =
          i < rank - shape.size() ? 1 : shape[i - (rank - shape.size())];
      if (a != b && a != 1 && b != 1)
        return nodeError(ctx.node, "cannot expand dims " + dimsStr(inDims) +
                                       " to shape " + dimsStr(shape));
      dims[i] = a == 1 ? b : a;
    }
    if (auto err = checkRuntimeDims(ctx.node, "shape " + dimsStr(shape), dims,
                                    ctx.outputs[0].getDims()))
      return err;
    runStridedCopy(plan, ctx.inputs[0].getData(), ctx.outputs[0].getData(),
                   ctx.parallel);
    return Error::success();
  };
}

Kernel sliceKernel() {
  return [](const KernelContext &ctx) -> Error {
    const Tensor &data = ctx.inputs[0];
    ArrayRef<int64_t> dims = data.getDims();
    int64_t rank = data.getRank();
    std::vector<int64_t> starts = readInts(ctx.inputs[1]);
    std::vector<int64_t> ends = readInts(ctx.inputs[2]);
    std::vector<int64_t> axes;
    if (ctx.inputs.size() > 3) {
      axes = readInts(ctx.inputs[3]);
    } else {
      for (size_t i = 0; i < starts.size(); ++i)
        axes.push_back(static_cast<int64_t>(i));
    }
    std::vector<int64_t> steps(starts.size(), 1);
    if (ctx.inputs.size() > 4)
      steps = readInts(ctx.inputs[4]);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size())
      return nodeError(ctx.node,
                       "starts, ends, axes and steps differ in length");
    auto sliced = axisSet(ctx.node, axes, rank);
    if (!sliced)
      return sliced.takeError();

    Dims outDims(dims.begin(), dims.end());
    Dims rowStrides = rowMajorStrides(dims);
    Dims strides = rowStrides;
    int64_t base = 0;
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
      int64_t dim = dims[axis], step = steps[i];
      if (step == 0)
        return nodeError(ctx.node,
                         "steps " + dimsStr(steps) + " has a zero step");
      int64_t start = starts[i], end = ends[i];
      // dim >= 0, so adding it to a negative value cannot overflow.
      if (start < 0)
        start += dim;
      if (end < 0)
        end += dim;
      int64_t length = 0;
      if (dim == 0) {
        start = 0;
      } else if (step > 0) {
        start = std::clamp<int64_t>(start, 0, dim);
        end = std::clamp<int64_t>(end, 0, dim);
        if (end > start)
          length = (end - start - 1) / step + 1;
      } else {
        start = std::clamp<int64_t>(start, 0, dim - 1);
        end = std::clamp<int64_t>(end, -1, dim - 1);
        if (start > end) {
          uint64_t stride = 0 - static_cast<uint64_t>(step);
          length = static_cast<int64_t>(
              static_cast<uint64_t>(start - end - 1) / stride + 1);
        }
      }
      outDims[axis] = length;
      if (length > 0)
        base += start * rowStrides[axis];
      // With one element the step is never taken (and might overflow).
      strides[axis] = length > 1 ? step * rowStrides[axis] : 0;
    }
    if (auto err = checkRuntimeDims(ctx.node,
                                    "starts " + dimsStr(starts) + " and ends " +
                                        dimsStr(ends),
                                    outDims, ctx.outputs[0].getDims()))
      return err;
    StridedCopyPlan plan = makeStridedCopyPlan(outDims, strides, base,
                                               ir::dtypeSize(data.getDType()));
    runStridedCopy(plan, data.getData(), ctx.outputs[0].getData(),
                   ctx.parallel);
    return Error::success();
  };
}

//===----------------------------------------------------------------------===//
// Concat, Split
//===----------------------------------------------------------------------===//

Kernel selectConcat(const ir::Node &node) {
  const ir::TensorType &outType = node.getResult(0)->getType();
  unsigned axis =
      normalizeAxis(*node.getAttrs().getInt("axis"), outType.getRank());
  int64_t outer = product(outType.getDims().take_front(axis));
  int64_t elementSize = ir::dtypeSize(outType.getDType());
  // Bytes each operand contributes per outer index.
  std::vector<int64_t> chunkBytes;
  for (ir::Value *operand : node.getOperands())
    chunkBytes.push_back(
        product(operand->getType().getDims().drop_front(axis)) * elementSize);
  return [outer, chunkBytes](const KernelContext &ctx) -> Error {
    int64_t rowBytes = 0;
    for (int64_t bytes : chunkBytes)
      rowBytes += bytes;
    if (rowBytes == 0)
      return Error::success();
    auto *out = static_cast<uint8_t *>(ctx.outputs[0].getData());
    ctx.parallel.run(
        outer, std::max<int64_t>(1, kCopyGrainElements * 4 / rowBytes),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            uint8_t *dst = out + o * rowBytes;
            for (size_t i = 0; i < chunkBytes.size(); ++i) {
              if (chunkBytes[i] == 0)
                continue;
              const auto *src =
                  static_cast<const uint8_t *>(ctx.inputs[i].getData());
              std::memcpy(dst, src + o * chunkBytes[i], chunkBytes[i]);
              dst += chunkBytes[i];
            }
          }
        });
    return Error::success();
  };
}

Kernel selectSplit(const ir::Node &node) {
  const ir::TensorType &inType = node.getOperand(0)->getType();
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(0),
                                inType.getRank());
  int64_t outer = product(inType.getDims().take_front(axis));
  int64_t innerBytes = product(inType.getDims().drop_front(axis + 1)) *
                       ir::dtypeSize(inType.getDType());
  int64_t axisDim = inType.getDim(axis);
  bool hasSplit = node.getNumOperands() == 2;
  return [outer, innerBytes, axisDim, axis,
          hasSplit](const KernelContext &ctx) -> Error {
    std::vector<int64_t> sizes;
    for (const Tensor &output : ctx.outputs)
      sizes.push_back(output.getDims()[axis]);
    if (hasSplit) {
      std::vector<int64_t> split = readInts(ctx.inputs[1]);
      if (split != sizes)
        return nodeError(ctx.node, "split " + dimsStr(split) +
                                       " does not match the result sizes " +
                                       dimsStr(sizes) + " along axis " +
                                       Twine(axis));
    }
    int64_t rowBytes = axisDim * innerBytes;
    if (rowBytes == 0)
      return Error::success();
    const auto *in = static_cast<const uint8_t *>(ctx.inputs[0].getData());
    ctx.parallel.run(
        outer, std::max<int64_t>(1, kCopyGrainElements * 4 / rowBytes),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            const uint8_t *src = in + o * rowBytes;
            for (size_t i = 0; i < sizes.size(); ++i) {
              int64_t bytes = sizes[i] * innerBytes;
              if (bytes != 0)
                std::memcpy(static_cast<uint8_t *>(ctx.outputs[i].getData()) +
                                o * bytes,
                            src, bytes);
              src += bytes;
            }
          }
        });
    return Error::success();
  };
}

//===----------------------------------------------------------------------===//
// Gather, ScatterElements
//===----------------------------------------------------------------------===//

/// \returns \p indices with negative entries moved into [0, \p dim), or an
/// error naming the first one outside [-dim, dim).
Expected<std::vector<int64_t>> normalizeIndices(const ir::Node &node,
                                                const Tensor &indices,
                                                int64_t dim, unsigned axis) {
  std::vector<int64_t> values = readInts(indices);
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t index = values[i];
    if (index < -dim || index >= dim)
      return nodeError(node,
                       "index " + Twine(index) + " at position " + Twine(i) +
                           " of the indices is out of range [" + Twine(-dim) +
                           ", " + Twine(dim) + ") for axis " + Twine(axis));
    values[i] = index < 0 ? index + dim : index;
  }
  return values;
}

Kernel selectGather(const ir::Node &node) {
  const ir::TensorType &dataType = node.getOperand(0)->getType();
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(0),
                                dataType.getRank());
  int64_t outer = product(dataType.getDims().take_front(axis));
  int64_t axisDim = dataType.getDim(axis);
  int64_t inner = product(dataType.getDims().drop_front(axis + 1));
  unsigned elementSize = ir::dtypeSize(dataType.getDType());
  return dispatchBySize(elementSize, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [outer, axisDim, inner, axis](const KernelContext &ctx) -> Error {
      auto indices = normalizeIndices(ctx.node, ctx.inputs[1], axisDim, axis);
      if (!indices)
        return indices.takeError();
      const T *data = static_cast<const T *>(ctx.inputs[0].getData());
      T *out = static_cast<T *>(ctx.outputs[0].getData());
      int64_t count = static_cast<int64_t>(indices->size());
      if (inner == 0)
        return Error::success();
      ctx.parallel.run(
          outer * count, std::max<int64_t>(1, kCopyGrainElements / inner),
          [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
              int64_t o = task / count, j = task % count;
              const T *src = data + (o * axisDim + (*indices)[j]) * inner;
              T *dst = out + task * inner;
              if (inner == 1)
                *dst = *src;
              else
                std::memcpy(dst, src, inner * sizeof(T));
            }
          });
      return Error::success();
    };
  });
}

enum class ScatterReduction { None, Add, Mul };

/// Fibers one ScatterElements task takes together (see makeScatterKernel).
constexpr int64_t kScatterColumns = 64;

template <typename T, ScatterReduction R>
Kernel makeScatterKernel(Dims indexDims, Dims dataDims, unsigned axis) {
  return [indexDims, dataDims, axis](const KernelContext &ctx) -> Error {
    auto indices =
        normalizeIndices(ctx.node, ctx.inputs[1], dataDims[axis], axis);
    if (!indices)
      return indices.takeError();
    copyTensorBytes(ctx.inputs[0], ctx.outputs[0], ctx.parallel);
    const T *updates = static_cast<const T *>(ctx.inputs[2].getData());
    T *out = static_cast<T *>(ctx.outputs[0].getData());
    int64_t axisLen = indexDims[axis];
    if (axisLen == 0 || indices->empty())
      return Error::success();
    Dims indexStrides = rowMajorStrides(indexDims);
    Dims dataStrides = rowMajorStrides(dataDims);
    // A fiber fixes every index but the axis one. Updates of different
    // fibers write different output elements, so fibers run in parallel and
    // each applies its updates in increasing axis order: the same order as
    // a sequential row-major walk of the updates. When the axis is not the
    // last dim, a task takes up to kScatterColumns fibers that differ only
    // in the last index and walks the axis once for all of them, so that
    // each step reads and writes a contiguous run (an embedding's gradient
    // adds whole rows) instead of one element per cache line.
    size_t rank = indexDims.size();
    int64_t columns = axis + 1 < rank ? indexDims[rank - 1] : 1;
    int64_t columnTiles = (columns + kScatterColumns - 1) / kScatterColumns;
    int64_t groups = static_cast<int64_t>(indices->size()) / axisLen / columns;
    const int64_t *index = indices->data();
    auto apply = [](T &target, T value) {
      if constexpr (R == ScatterReduction::None) {
        target = value;
      } else if constexpr (R == ScatterReduction::Add) {
        if constexpr (std::is_integral_v<T>)
          target = wrapAdd(target, value);
        else
          target = target + value;
      } else {
        if constexpr (std::is_integral_v<T>)
          target = wrapMul(target, value);
        else
          target = target * value;
      }
    };
    int64_t taskElements = axisLen * std::min(columns, kScatterColumns);
    ctx.parallel.run(
        groups * columnTiles,
        std::max<int64_t>(1, kCopyGrainElements / taskElements),
        [&](int64_t begin, int64_t end) {
          for (int64_t task = begin; task < end; ++task) {
            int64_t rest = task / columnTiles, uOffset = 0, oOffset = 0;
            for (size_t d = columns > 1 ? rank - 1 : rank; d > 0; --d) {
              if (d - 1 == axis)
                continue;
              int64_t i = rest % indexDims[d - 1];
              rest /= indexDims[d - 1];
              uOffset += i * indexStrides[d - 1];
              oOffset += i * dataStrides[d - 1];
            }
            int64_t c0 = (task % columnTiles) * kScatterColumns;
            int64_t c1 = std::min(columns, c0 + kScatterColumns);
            for (int64_t a = 0; a < axisLen; ++a) {
              int64_t u = uOffset + a * indexStrides[axis];
              for (int64_t c = c0; c < c1; ++c)
                apply(out[oOffset + index[u + c] * dataStrides[axis] + c],
                      updates[u + c]);
            }
          }
        });
    return Error::success();
  };
}

Expected<Kernel> selectScatterElements(const ir::Node &node) {
  const ir::TensorType &dataType = node.getOperand(0)->getType();
  const ir::TensorType &indexType = node.getOperand(1)->getType();
  DType dtype = dataType.getDType();
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(0),
                                dataType.getRank());
  std::string reduction =
      node.getAttrs().getString("reduction").value_or("none");
  Dims indexDims(indexType.getDims().begin(), indexType.getDims().end());
  Dims dataDims(dataType.getDims().begin(), dataType.getDims().end());
  if (reduction == "none")
    return dispatchBySize(ir::dtypeSize(dtype), [&](auto tag) -> Kernel {
      return makeScatterKernel<decltype(tag), ScatterReduction::None>(
          indexDims, dataDims, axis);
    });
  if (!isComputeNumeric(dtype))
    return nodeError(node, "the cpu backend has no ScatterElements kernel for "
                           "reduction \"" +
                               reduction + "\" on dtype " +
                               ir::dtypeName(dtype) +
                               " (supported: f32, f64, i64, i32, i8, u8)");
  bool add = reduction == "add";
  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    if (add)
      return makeScatterKernel<T, ScatterReduction::Add>(indexDims, dataDims,
                                                         axis);
    return makeScatterKernel<T, ScatterReduction::Mul>(indexDims, dataDims,
                                                       axis);
  });
}

//===----------------------------------------------------------------------===//
// Shape, Constant, ConstantOfShape, Range, OneHot
//===----------------------------------------------------------------------===//

/// A kernel that writes \p bytes (precomputed at selection) to its result.
Kernel constantBytesKernel(std::vector<uint8_t> bytes) {
  auto shared = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return [shared](const KernelContext &ctx) -> Error {
    assert(static_cast<int64_t>(shared->size()) ==
           ctx.outputs[0].getByteSize());
    if (!shared->empty())
      std::memcpy(ctx.outputs[0].getData(), shared->data(), shared->size());
    return Error::success();
  };
}

template <typename T> std::vector<uint8_t> toBytes(ArrayRef<T> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

Kernel selectShape(const ir::Node &node) {
  ArrayRef<int64_t> dims = node.getOperand(0)->getType().getDims();
  int64_t rank = dims.size();
  auto clampAxis = [rank](int64_t axis) {
    if (axis < 0)
      axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  };
  int64_t start = clampAxis(node.getAttrs().getInt("start").value_or(0));
  int64_t end = clampAxis(node.getAttrs().getInt("end").value_or(rank));
  std::vector<int64_t> values;
  for (int64_t d = start; d < end; ++d)
    values.push_back(dims[d]);
  return constantBytesKernel(toBytes<int64_t>(values));
}

Kernel selectConstant(const ir::Node &node) {
  const ir::AttrList &attrs = node.getAttrs();
  // Shape inference has checked that exactly one well-kinded form is there.
  if (ir::TensorDataPtr value = attrs.getTensor("value")) {
    ArrayRef<uint8_t> bytes = value->getBytes();
    return constantBytesKernel(
        std::vector<uint8_t>(bytes.begin(), bytes.end()));
  }
  if (auto value = attrs.getFloat("value_float"))
    return constantBytesKernel(toBytes<float>(*value));
  if (auto value = attrs.getInt("value_int"))
    return constantBytesKernel(toBytes<int64_t>(*value));
  if (auto value = attrs.getFloats("value_floats"))
    return constantBytesKernel(toBytes<float>(*value));
  if (auto value = attrs.getInts("value_ints")) {
    // An empty value_floats parses as an int list.
    if (value->empty())
      return constantBytesKernel({});
    return constantBytesKernel(toBytes<int64_t>(*value));
  }
  llvm_unreachable("shape inference accepted a Constant without a value");
}

Kernel selectConstantOfShape(const ir::Node &node) {
  const ir::TensorType &outType = node.getResult(0)->getType();
  unsigned size = ir::dtypeSize(outType.getDType());
  std::vector<uint8_t> element(size, 0);
  if (ir::TensorDataPtr value = node.getAttrs().getTensor("value"))
    std::memcpy(element.data(), value->getBytes().data(), size);
  return dispatchBySize(size, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    T fill;
    std::memcpy(&fill, element.data(), sizeof(T));
    return [fill](const KernelContext &ctx) -> Error {
      std::vector<int64_t> shape = readInts(ctx.inputs[0]);
      if (auto err = checkRuntimeDims(ctx.node, "shape " + dimsStr(shape),
                                      shape, ctx.outputs[0].getDims()))
        return err;
      T *out = static_cast<T *>(ctx.outputs[0].getData());
      // In parallel blocks: an embedding gradient's zeros are 94 MB.
      ctx.parallel.run(ctx.outputs[0].getNumElements(), kCopyGrainElements,
                       [&](int64_t begin, int64_t end) {
                         std::fill(out + begin, out + end, fill);
                       });
      return Error::success();
    };
  });
}

/// Range: the length is ceil((limit - start) / delta) (the difference in the
/// element type, the division in double; exact in 128 bits for integers),
/// and element i is start + i * delta.
template <typename T> Kernel makeRangeKernel() {
  return [](const KernelContext &ctx) -> Error {
    T start = *ctx.inputs[0].getData<T>();
    T limit = *ctx.inputs[1].getData<T>();
    T delta = *ctx.inputs[2].getData<T>();
    if (delta == T(0))
      return nodeError(ctx.node, "delta is zero");
    int64_t count = 0;
    if constexpr (std::is_integral_v<T>) {
      __int128 diff = static_cast<__int128>(limit) - start;
      __int128 steps = 0;
      if (delta > 0 && diff > 0)
        steps = 1 + (diff - 1) / delta;
      else if (delta < 0 && diff < 0)
        steps = 1 + (diff + 1) / delta;
      count = steps > std::numeric_limits<int64_t>::max()
                  ? std::numeric_limits<int64_t>::max()
                  : static_cast<int64_t>(steps);
    } else {
      double steps = std::ceil(static_cast<double>(T(limit - start)) /
                               static_cast<double>(delta));
      if (std::isnan(steps) || steps >= 0x1p62)
        return nodeError(ctx.node, "cannot compute the number of elements");
      count = steps > 0 ? static_cast<int64_t>(steps) : 0;
    }
    if (auto err = checkRuntimeDims(ctx.node, "the start, limit and delta",
                                    {count}, ctx.outputs[0].getDims()))
      return err;
    T *out = ctx.outputs[0].getData<T>();
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral_v<T>)
        out[i] = wrapAdd(start, wrapMul(static_cast<T>(i), delta));
      else
        out[i] = start + static_cast<T>(i) * delta;
    }
    return Error::success();
  };
}

Expected<Kernel> selectRange(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  switch (dtype) {
  case DType::F32:
    return makeRangeKernel<float>();
  case DType::F64:
    return makeRangeKernel<double>();
  case DType::I64:
    return makeRangeKernel<int64_t>();
  case DType::I32:
    return makeRangeKernel<int32_t>();
  default:
    return unsupportedDType(node, "operands", dtype, "f32, f64, i64, i32");
  }
}

template <typename I, typename V>
Kernel makeOneHotKernel(int64_t outer, int64_t inner, unsigned axis) {
  return [outer, inner, axis](const KernelContext &ctx) -> Error {
    // ONNX casts a non-integer depth to int64.
    double depthValue = std::trunc(readScalarAsDouble(ctx.inputs[1]));
    int64_t depth = ctx.outputs[0].getDims()[axis];
    if (depthValue != static_cast<double>(depth))
      return nodeError(ctx.node, "depth " + std::to_string(depthValue) +
                                     " does not match the declared dim " +
                                     Twine(depth) + " at axis " + Twine(axis));
    const I *indices = static_cast<const I *>(ctx.inputs[0].getData());
    const V *values = static_cast<const V *>(ctx.inputs[2].getData());
    V off = values[0], on = values[1];
    V *out = static_cast<V *>(ctx.outputs[0].getData());
    std::fill(out, out + ctx.outputs[0].getNumElements(), off);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        I raw = indices[o * inner + i];
        if constexpr (std::is_floating_point_v<I>)
          if (std::isnan(raw) || std::fabs(raw) >= 0x1p62)
            continue;
        int64_t index = static_cast<int64_t>(raw);
        if (index < 0)
          index += depth;
        // Out of range: the row stays all off, as ONNX specifies.
        if (index < 0 || index >= depth)
          continue;
        out[(o * depth + index) * inner + i] = on;
      }
    return Error::success();
  };
}

Expected<Kernel> selectOneHot(const ir::Node &node) {
  const ir::TensorType &indexType = node.getOperand(0)->getType();
  const ir::TensorType &outType = node.getResult(0)->getType();
  DType indexDType = indexType.getDType();
  if (!isComputeNumeric(indexDType))
    return unsupportedDType(node, "indices", indexDType,
                            "f32, f64, i64, i32, i8, u8");
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(-1),
                                outType.getRank());
  int64_t outer = product(indexType.getDims().take_front(axis));
  int64_t inner = product(indexType.getDims().drop_front(axis));
  return dispatchNumeric(indexDType, [&](auto indexTag) -> Kernel {
    using I = decltype(indexTag);
    return dispatchBySize(
        ir::dtypeSize(outType.getDType()), [&](auto valueTag) -> Kernel {
          return makeOneHotKernel<I, decltype(valueTag)>(outer, inner, axis);
        });
  });
}

} // namespace

Expected<Kernel> selectDataMovement(const ir::Node &node) {
  switch (node.getOp()) {
  case OpKind::Identity:
    return copyKernel();
  case OpKind::Reshape:
    return reshapeKernel(node.getAttrs().getInt("allowzero").value_or(0) != 0);
  case OpKind::Unsqueeze:
    return unsqueezeKernel();
  case OpKind::Squeeze:
    // Without axes every size-1 dim goes: a plain copy.
    if (node.getNumOperands() == 1)
      return copyKernel();
    return squeezeKernel();
  case OpKind::Transpose:
    return selectTranspose(node);
  case OpKind::Expand:
    return selectExpand(node);
  case OpKind::Slice:
    return sliceKernel();
  case OpKind::Concat:
    return selectConcat(node);
  case OpKind::Split:
    return selectSplit(node);
  case OpKind::Gather:
    return selectGather(node);
  case OpKind::ScatterElements:
    return selectScatterElements(node);
  case OpKind::Shape:
    return selectShape(node);
  case OpKind::Constant:
    return selectConstant(node);
  case OpKind::ConstantOfShape:
    return selectConstantOfShape(node);
  case OpKind::Range:
    return selectRange(node);
  case OpKind::OneHot:
    return selectOneHot(node);
  default:
    llvm_unreachable("not a data-movement op");
  }
}

} // namespace remat::runtime::cpu::detail
