//===- runtime/cpu/Indexing.cpp - Index-driven ops ------------------------===//
//
// The index-driven ops added for the transformer families (issue 13), kept
// apart from DataMovement.cpp, and Tile, TopK and EyeLike, added since
// (issue 40).
// GatherElements, Trilu, Pad and Tile only move elements and work on every
// dtype; CumSum adds in the element type, sequentially along the axis, one line
// per task, so its result does not depend on the thread count; TopK sorts one
// line per task. Operand values that the kernels read at run time (Trilu's k,
// CumSum's axis, Pad's pads and axes, Tile's repeats, TopK's K) are checked
// there.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelImpl.h"
#include "runtime/cuda/KernelBodies.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace remat::runtime::cpu::detail {

namespace {

//===----------------------------------------------------------------------===//
// GatherElements
//===----------------------------------------------------------------------===//

template <typename T, typename I>
Kernel makeGatherElementsKernel(unsigned axis, Dims dataDims, Dims indexDims) {
  return [=](const KernelContext &ctx) -> Error {
    const T *data = static_cast<const T *>(ctx.inputs[0].getData());
    const I *indices = ctx.inputs[1].getData<I>();
    T *out = static_cast<T *>(ctx.outputs[0].getData());
    int64_t count = ctx.outputs[0].getNumElements();
    int64_t axisDim = dataDims[axis];
    for (int64_t i = 0; i < count; ++i) {
      int64_t index = indices[i];
      if (index < -axisDim || index >= axisDim)
        return nodeError(ctx.node,
                         "index " + Twine(index) + " (element " + Twine(i) +
                             " of the indices) is out of range for axis " +
                             Twine(axis) + " of size " + Twine(axisDim));
    }
    Dims dataStrides = rowMajorStrides(dataDims);
    size_t rank = indexDims.size();
    ctx.parallel.run(count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      // The multi-index of `begin` over the indices' dims.
      Dims position(rank, 0);
      int64_t rest = begin;
      for (size_t d = rank; d > 0; --d) {
        position[d - 1] = rest % indexDims[d - 1];
        rest /= indexDims[d - 1];
      }
      for (int64_t i = begin; i < end; ++i) {
        int64_t offset = 0;
        for (size_t d = 0; d < rank; ++d)
          if (d != axis)
            offset += position[d] * dataStrides[d];
        int64_t index = indices[i];
        if (index < 0)
          index += axisDim;
        out[i] = data[offset + index * dataStrides[axis]];
        for (size_t d = rank; d > 0; --d) {
          if (++position[d - 1] < indexDims[d - 1])
            break;
          position[d - 1] = 0;
        }
      }
    });
    return Error::success();
  };
}

Expected<Kernel> selectGatherElements(const ir::Node &node) {
  const ir::TensorType &data = node.getOperand(0)->getType();
  const ir::TensorType &indices = node.getOperand(1)->getType();
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(0),
                                data.getRank());
  Dims dataDims(data.getDims().begin(), data.getDims().end());
  Dims indexDims(indices.getDims().begin(), indices.getDims().end());
  return dispatchBySize(ir::dtypeSize(data.getDType()), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    if (indices.getDType() == DType::I32)
      return makeGatherElementsKernel<T, int32_t>(axis, dataDims, indexDims);
    return makeGatherElementsKernel<T, int64_t>(axis, dataDims, indexDims);
  });
}

//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

template <typename T> Kernel makeTriluKernel(bool upper, int64_t rows,
                                             int64_t cols) {
  return [=](const KernelContext &ctx) -> Error {
    int64_t k = ctx.inputs.size() > 1 ? readInts(ctx.inputs[1])[0] : 0;
    const T *in = static_cast<const T *>(ctx.inputs[0].getData());
    T *out = static_cast<T *>(ctx.outputs[0].getData());
    int64_t numRows = ctx.outputs[0].getNumElements() / std::max<int64_t>(
                                                            cols, 1);
    if (cols == 0)
      return Error::success();
    ctx.parallel.run(numRows, std::max<int64_t>(1, kElementwiseGrain / cols),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t r = begin; r < end; ++r) {
                         // Row i of its matrix keeps columns j with
                         // j - i >= k (upper) or j - i <= k (lower).
                         int64_t i = r % rows;
                         const T *src = in + r * cols;
                         T *dst = out + r * cols;
                         for (int64_t j = 0; j < cols; ++j) {
                           bool keep = upper ? j - i >= k : j - i <= k;
                           dst[j] = keep ? src[j] : T(0);
                         }
                       }
                     });
    return Error::success();
  };
}

Expected<Kernel> selectTrilu(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  bool upper = node.getAttrs().getInt("upper").value_or(1) != 0;
  int64_t rows = type.getDim(type.getRank() - 2);
  int64_t cols = type.getDim(type.getRank() - 1);
  return dispatchBySize(ir::dtypeSize(type.getDType()), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return makeTriluKernel<T>(upper, rows, cols);
  });
}

//===----------------------------------------------------------------------===//
// CumSum
//===----------------------------------------------------------------------===//

/// a + b; integers wrap.
template <typename T> T addInType(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return wrapAdd(a, b);
  else
    return a + b;
}

template <typename T>
Kernel makeCumSumKernel(Dims dims, bool exclusive, bool reverse) {
  return [=](const KernelContext &ctx) -> Error {
    int64_t rank = static_cast<int64_t>(dims.size());
    int64_t axisValue = readInts(ctx.inputs[1])[0];
    if (axisValue < -rank || axisValue >= rank)
      return nodeError(ctx.node, "axis " + Twine(axisValue) +
                                     " is out of range for rank " +
                                     Twine(rank));
    unsigned axis = normalizeAxis(axisValue, rank);
    int64_t outer = product(ArrayRef<int64_t>(dims).take_front(axis));
    int64_t length = dims[axis];
    int64_t inner = product(ArrayRef<int64_t>(dims).drop_front(axis + 1));
    const T *in = ctx.inputs[0].getData<T>();
    T *out = ctx.outputs[0].getData<T>();
    // One task per line (outer, inner): a sequential sum in axis order.
    int64_t lines = outer * inner;
    ctx.parallel.run(
        lines, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(
                                                            length, 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t line = begin; line < end; ++line) {
            int64_t base = (line / inner) * length * inner + line % inner;
            T sum = T(0);
            for (int64_t s = 0; s < length; ++s) {
              int64_t step = reverse ? length - 1 - s : s;
              int64_t offset = base + step * inner;
              T value = in[offset];
              if (exclusive) {
                out[offset] = sum;
                sum = addInType(sum, value);
              } else {
                sum = addInType(sum, value);
                out[offset] = sum;
              }
            }
          }
        });
    return Error::success();
  };
}

Expected<Kernel> selectCumSum(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  DType dtype = type.getDType();
  if (dtype != DType::F32 && dtype != DType::F64 && dtype != DType::I64 &&
      dtype != DType::I32)
    return unsupportedDType(node, "operand", dtype, "f32, f64, i64, i32");
  bool exclusive = node.getAttrs().getInt("exclusive").value_or(0) != 0;
  bool reverse = node.getAttrs().getInt("reverse").value_or(0) != 0;
  Dims dims(type.getDims().begin(), type.getDims().end());
  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return makeCumSumKernel<T>(dims, exclusive, reverse);
  });
}

/// Calls \p body(row, coords) for each row (the last dim) of a result of
/// \p outDims (rank >= 1), split across threads; \p coords are the row's
/// coordinates in the other dims, outermost first. Pad and Tile fill a
/// result row from the one input row those coordinates select.
template <typename Body>
void forEachRow(const KernelContext &ctx, const Dims &outDims, Body body) {
  size_t outer = outDims.size() - 1;
  int64_t cols = outDims[outer];
  int64_t numRows = cols ? product(outDims) / cols : 0;
  ctx.parallel.run(
      numRows,
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(cols, 1)),
      [&](int64_t rowBegin, int64_t rowEnd) {
        Dims coords(outer);
        for (int64_t row = rowBegin; row < rowEnd; ++row) {
          int64_t rest = row;
          for (size_t d = outer; d > 0; --d) {
            coords[d - 1] = rest % outDims[d - 1];
            rest /= outDims[d - 1];
          }
          body(row, ArrayRef<int64_t>(coords));
        }
      });
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

// The mode and the source position of a padded element are the CUDA
// backend's body (runtime/cuda/KernelBodies.h), so both backends pad alike.
using cuda::body::PadMode;
using cuda::body::padSource;

template <typename T>
Kernel makePadKernel(PadMode mode, Dims inDims, Dims outDims) {
  return [=](const KernelContext &ctx) -> Error {
    size_t rank = inDims.size();
    std::vector<int64_t> pads = readInts(ctx.inputs[1]);
    std::vector<int64_t> axes;
    if (ctx.inputs.size() > 3) {
      for (int64_t axis : readInts(ctx.inputs[3])) {
        if (axis < -int64_t(rank) || axis >= int64_t(rank))
          return nodeError(ctx.node, "axis " + Twine(axis) +
                                         " is out of range for rank " +
                                         Twine(rank));
        axes.push_back(normalizeAxis(axis, rank));
      }
    } else {
      for (size_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    if (pads.size() != 2 * axes.size())
      return nodeError(ctx.node, "pads has " + Twine(pads.size()) +
                                     " entries, expected " +
                                     Twine(2 * axes.size()));
    Dims begin(rank, 0), computed(inDims);
    for (size_t k = 0; k < axes.size(); ++k) {
      begin[axes[k]] = pads[k];
      computed[axes[k]] += pads[k] + pads[k + axes.size()];
    }
    if (auto err = checkRuntimeDims(ctx.node, "the pads operand", computed,
                                    outDims))
      return err;
    T fill = T(0);
    if (ctx.inputs.size() > 2 && mode == PadMode::Constant)
      std::memcpy(&fill, ctx.inputs[2].getData(), sizeof(T));
    const T *in = static_cast<const T *>(ctx.inputs[0].getData());
    T *out = static_cast<T *>(ctx.outputs[0].getData());
    if (rank == 0) {
      out[0] = in[0];
      return Error::success();
    }
    Dims inStrides = rowMajorStrides(inDims);
    int64_t cols = outDims[rank - 1];
    forEachRow(ctx, outDims, [&](int64_t row, ArrayRef<int64_t> coords) {
      // The input offset of this row's outer dims, or -1 when the row lies
      // in constant padding.
      int64_t offset = 0;
      for (size_t d = 0; d < coords.size() && offset >= 0; ++d) {
        int64_t src = padSource(coords[d] - begin[d], inDims[d], mode);
        offset = src < 0 ? -1 : offset + src * inStrides[d];
      }
      T *dst = out + row * cols;
      if (offset < 0) {
        std::fill(dst, dst + cols, fill);
        return;
      }
      const T *src = in + offset;
      int64_t size = inDims[rank - 1], shift = begin[rank - 1];
      for (int64_t j = 0; j < cols; ++j) {
        int64_t s = padSource(j - shift, size, mode);
        dst[j] = s < 0 ? fill : src[s];
      }
    });
    return Error::success();
  };
}

Expected<Kernel> selectPad(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  std::string modeName =
      node.getAttrs().getString("mode").value_or("constant");
  PadMode mode = modeName == "reflect" ? PadMode::Reflect
                 : modeName == "edge"  ? PadMode::Edge
                 : modeName == "wrap"  ? PadMode::Wrap
                                       : PadMode::Constant;
  Dims inDims(type.getDims().begin(), type.getDims().end());
  llvm::ArrayRef<int64_t> out = node.getResult(0)->getType().getDims();
  Dims outDims(out.begin(), out.end());
  return dispatchBySize(ir::dtypeSize(type.getDType()), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return makePadKernel<T>(mode, inDims, outDims);
  });
}

/// Tile: result row r (all dims but the last) copies the input row at each
/// outer coordinate modulo the input's dim, repeated along the last dim.
template <typename T> Kernel makeTileKernel(Dims inDims, Dims outDims) {
  return [=](const KernelContext &ctx) -> Error {
    size_t rank = inDims.size();
    std::vector<int64_t> repeats = readInts(ctx.inputs[1]);
    if (repeats.size() != rank)
      return nodeError(ctx.node, "repeats has " + Twine(repeats.size()) +
                                     " entries, expected " + Twine(rank));
    Dims computed(inDims);
    for (size_t d = 0; d < rank; ++d)
      computed[d] *= repeats[d];
    if (auto err = checkRuntimeDims(ctx.node, "the repeats operand", computed,
                                    outDims))
      return err;
    const T *in = static_cast<const T *>(ctx.inputs[0].getData());
    T *out = static_cast<T *>(ctx.outputs[0].getData());
    if (rank == 0) {
      out[0] = in[0];
      return Error::success();
    }
    int64_t cols = outDims[rank - 1], inCols = inDims[rank - 1];
    Dims inStrides = rowMajorStrides(inDims);
    forEachRow(ctx, outDims, [&](int64_t row, ArrayRef<int64_t> coords) {
      int64_t offset = 0;
      for (size_t d = 0; d < coords.size(); ++d)
        offset += coords[d] % inDims[d] * inStrides[d];
      T *dst = out + row * cols;
      for (int64_t j = 0; j < cols; j += inCols)
        std::copy(in + offset, in + offset + inCols, dst + j);
    });
    return Error::success();
  };
}

Expected<Kernel> selectTile(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  Dims inDims(type.getDims().begin(), type.getDims().end());
  llvm::ArrayRef<int64_t> out = node.getResult(0)->getType().getDims();
  Dims outDims(out.begin(), out.end());
  return dispatchBySize(ir::dtypeSize(type.getDType()), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return makeTileKernel<T>(inDims, outDims);
  });
}

//===----------------------------------------------------------------------===//
// TopK
//===----------------------------------------------------------------------===//

/// Whether \p a comes before \p b in TopK's order: larger first (smaller
/// when !\p largest), NaN above every number and equal to NaN.
template <typename T> bool topKBeats(T a, T b, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    bool aNaN = std::isnan(a), bNaN = std::isnan(b);
    if (aNaN || bNaN)
      return largest ? aNaN && !bNaN : bNaN && !aNaN;
  }
  return largest ? a > b : a < b;
}

/// TopK of \p outer x \p count x \p inner elements over the middle dim:
/// each line's indices, partially sorted by value then index.
template <typename T>
Kernel makeTopKKernel(int64_t outer, int64_t count, int64_t inner, int64_t k,
                      bool largest) {
  return [=](const KernelContext &ctx) -> Error {
    int64_t runtimeK = ctx.inputs[1].getData<int64_t>()[0];
    if (runtimeK != k)
      return nodeError(ctx.node, "K is " + Twine(runtimeK) +
                                     ", but the node's results have " +
                                     Twine(k) + " along the axis");
    const T *x = ctx.inputs[0].getData<T>();
    T *values = ctx.outputs[0].getData<T>();
    int64_t *indices = ctx.outputs[1].getData<int64_t>();
    ctx.parallel.run(
        outer * inner,
        std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(count, 1)),
        [&](int64_t begin, int64_t end) {
          std::vector<int64_t> order(count);
          for (int64_t line = begin; line < end; ++line) {
            int64_t o = line / inner, i = line % inner;
            const T *in = x + o * count * inner + i;
            std::iota(order.begin(), order.end(), int64_t(0));
            std::partial_sort(
                order.begin(), order.begin() + k, order.end(),
                [&](int64_t a, int64_t b) {
                  if (topKBeats(in[a * inner], in[b * inner], largest))
                    return true;
                  if (topKBeats(in[b * inner], in[a * inner], largest))
                    return false;
                  return a < b;
                });
            int64_t outBase = o * k * inner + i;
            for (int64_t j = 0; j < k; ++j) {
              values[outBase + j * inner] = in[order[j] * inner];
              indices[outBase + j * inner] = order[j];
            }
          }
        });
    return Error::success();
  };
}

Expected<Kernel> selectTopK(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  ir::DType dtype = type.getDType();
  if (!isComputeNumeric(dtype))
    return unsupportedDType(node, "operand", dtype,
                            "f32, f64, i64, i32, i8, u8");
  int64_t rank = type.getRank();
  int64_t axis = node.getAttrs().getInt("axis").value_or(-1);
  axis = axis < 0 ? axis + rank : axis;
  bool largest = node.getAttrs().getInt("largest").value_or(1) != 0;
  ArrayRef<int64_t> dims = type.getDims();
  int64_t outer = product(dims.take_front(axis));
  int64_t count = dims[axis];
  int64_t inner = product(dims.drop_front(axis + 1));
  int64_t k = node.getResult(0)->getType().getDim(axis);
  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    return makeTopKKernel<decltype(tag)>(outer, count, inner, k, largest);
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// EyeLike
//===----------------------------------------------------------------------===//

/// Zeros, and ones where column - row == k, in the result's dtype (bool
/// true is the byte 1).
template <typename T> Kernel makeEyeLikeKernel(int64_t k, int64_t cols) {
  return [=](const KernelContext &ctx) -> Error {
    T *out = static_cast<T *>(ctx.outputs[0].getData());
    int64_t count = ctx.outputs[0].getNumElements();
    for (int64_t e = 0; e < count; ++e)
      out[e] = e % cols - e / cols == k ? T(1) : T(0);
    return Error::success();
  };
}

Expected<Kernel> selectEyeLike(const ir::Node &node) {
  const ir::TensorType &type = node.getResult(0)->getType();
  int64_t k = node.getAttrs().getInt("k").value_or(0);
  int64_t cols = type.getDim(1);
  if (type.getDType() == ir::DType::Bool)
    return makeEyeLikeKernel<BoolByte>(k, cols);
  if (!isComputeNumeric(type.getDType()))
    return unsupportedDType(node, "result", type.getDType(),
                            "f32, f64, i64, i32, i8, u8, bool");
  return dispatchNumeric(type.getDType(), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return makeEyeLikeKernel<T>(k, cols);
  });
}

Expected<Kernel> selectIndexing(const ir::Node &node) {
  switch (node.getOp()) {
  case OpKind::GatherElements:
    return selectGatherElements(node);
  case OpKind::Trilu:
    return selectTrilu(node);
  case OpKind::CumSum:
    return selectCumSum(node);
  case OpKind::Pad:
    return selectPad(node);
  case OpKind::Tile:
    return selectTile(node);
  case OpKind::TopK:
    return selectTopK(node);
  case OpKind::EyeLike:
    return selectEyeLike(node);
  default:
    llvm_unreachable("not an op of Indexing.cpp");
  }
}

} // namespace remat::runtime::cpu::detail
