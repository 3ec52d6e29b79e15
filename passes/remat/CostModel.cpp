//===- passes/remat/CostModel.cpp - Predicted node times ------------------===//
#include "passes/remat/CostModel.h"

#include "ir/Limits.h"
#include "ir/Support.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace remat::passes::recompute {

CostKind getCostKind(ir::OpKind op) {
  // The op table's cost class (ir/Ops.def); reductions and normalizations
  // stream their operands once, like elementwise ops.
  switch (ir::getOpInfo(op).cost) {
  case ir::CostClass::Gemm:
    return CostKind::Gemm;
  case ir::CostClass::Free:
    return CostKind::Free;
  case ir::CostClass::MemoryBound:
  case ir::CostClass::Reduction:
    return CostKind::MemoryBound;
  }
  llvm_unreachable("unknown cost class");
}

CostKind getCostKind(const ir::Node &node) {
  if (node.getOp() != ir::OpKind::Extern)
    return getCostKind(node.getOp());
  // remat.Extern carries its class (shape inference checked the spelling).
  std::string cost = node.getAttrs().getString("cost").value_or("memory");
  if (cost == "gemm")
    return CostKind::Gemm;
  return cost == "free" ? CostKind::Free : CostKind::MemoryBound;
}

/// \returns remat.Extern's own count \p name ("flops", "bytes"), if given.
static std::optional<double> externCount(const ir::Node &node,
                                         llvm::StringRef name) {
  if (node.getOp() != ir::OpKind::Extern)
    return std::nullopt;
  if (std::optional<int64_t> count = node.getAttrs().getInt(name))
    return double(*count);
  return std::nullopt;
}

double nodeFlops(const ir::Node &node) {
  if (std::optional<double> flops = externCount(node, "flops"))
    return *flops;
  const ir::TensorType &out = node.getResult(0)->getType();
  double elements = double(out.getNumElements());
  if (getCostKind(node) != CostKind::Gemm)
    return getCostKind(node) == CostKind::Free ? 0 : elements;
  // The contracted dim: A's last dim for MatMul, or its first with transA.
  const ir::TensorType &a = node.getOperand(0)->getType();
  int64_t k = a.getRank() == 0 ? 1 : a.getDim(a.getRank() - 1);
  if (node.getOp() == ir::OpKind::Gemm &&
      node.getAttrs().getInt("transA").value_or(0) && a.getRank() == 2)
    k = a.getDim(0);
  if (a.getRank() == 1)
    k = a.getDim(0);
  // remat.PermutedMatMul contracts the dim its perm_a puts last.
  if (node.getOp() == ir::OpKind::PermutedMatMul)
    if (auto perm = node.getAttrs().getInts("perm_a"))
      k = a.getDim(unsigned(perm->back()));
  return 2.0 * elements * double(k);
}

double nodeBytes(const ir::Node &node) {
  if (std::optional<double> bytes = externCount(node, "bytes"))
    return *bytes;
  double bytes = 0;
  for (const ir::Value *operand : node.getOperands())
    bytes += double(operand->getType().getByteSize());
  for (const ir::Value *result : node.getResults())
    bytes += double(result->getType().getByteSize());
  return bytes;
}

double nodeSeconds(const ir::Node &node, const CostProfile &profile) {
  if (!profile.nodeSeconds.empty()) {
    // A profile times originals; a copy costs what its original does.
    const ir::Node &timed = node.getOrigin() ? *node.getOrigin() : node;
    auto it = profile.nodeSeconds.find(timed.getResult(0)->getName());
    if (it != profile.nodeSeconds.end())
      return it->second;
  }
  switch (getCostKind(node)) {
  case CostKind::Free:
    return 0;
  case CostKind::Gemm:
    return profile.nodeOverheadSeconds +
           std::max(nodeFlops(node) / profile.gemmFlopsPerSecond,
                    nodeBytes(node) / profile.bytesPerSecond);
  case CostKind::MemoryBound:
    return profile.nodeOverheadSeconds + nodeBytes(node) / profile.bytesPerSecond;
  }
  return 0;
}

FittedRates fitRates(const ir::Graph &graph, llvm::ArrayRef<double> seconds,
                     const CostProfile &base) {
  assert(seconds.size() == graph.getNumNodes() && "one time per node");
  struct Gemm {
    double flops, bytes, seconds;
  };
  std::vector<Gemm> gemms;
  double bytes = 0, memorySeconds = 0;
  FittedRates fit;
  size_t i = 0;
  for (const ir::Node &node : graph.getNodes()) {
    double beyond = seconds[i++] - base.nodeOverheadSeconds;
    if (!(beyond > 0) || !std::isfinite(beyond))
      continue;
    switch (getCostKind(node)) {
    case CostKind::Free:
      break;
    case CostKind::Gemm:
      gemms.push_back({nodeFlops(node), nodeBytes(node), beyond});
      break;
    case CostKind::MemoryBound:
      bytes += nodeBytes(node);
      memorySeconds += beyond;
      ++fit.memoryBoundNodes;
      break;
    }
  }
  if (bytes > 0) {
    fit.bytesPerSecond = bytes / memorySeconds;
  } else {
    fit.bytesPerSecond = base.bytesPerSecond;
    fit.memoryBoundNodes = 0;
  }

  // The GEMM rate r with sum(max(flops / r, bytes / bandwidth)) equal to the
  // measured total: the sum falls as r grows, from the total itself at the
  // FLOP-only rate towards the bytes terms' sum, so bisect between the two.
  double flops = 0, total = 0, bytesTerms = 0;
  for (const Gemm &gemm : gemms) {
    flops += gemm.flops;
    total += gemm.seconds;
    bytesTerms += gemm.bytes / fit.bytesPerSecond;
  }
  if (!(flops > 0)) {
    fit.gemmFlopsPerSecond = base.gemmFlopsPerSecond;
    return fit;
  }
  fit.gemmNodes = unsigned(gemms.size());
  double low = flops / total;
  fit.gemmFlopsPerSecond = low;
  if (!(bytesTerms < total))
    return fit; // The bytes alone take longer: no rate fits; FLOPs only.
  auto predicted = [&](double rate) {
    double sum = 0;
    for (const Gemm &gemm : gemms)
      sum += std::max(gemm.flops / rate, gemm.bytes / fit.bytesPerSecond);
    return sum;
  };
  double high = 2 * low;
  while (predicted(high) > total)
    high *= 2;
  for (int step = 0; step < 200 && high - low > 1e-15 * low; ++step) {
    double middle = 0.5 * (low + high);
    (predicted(middle) > total ? low : high) = middle;
  }
  // The doubling stops at a finite rate: once every bytes term wins, the
  // sum is bytesTerms exactly (the same additions in the same order).
  fit.gemmFlopsPerSecond = 0.5 * (low + high);
  assert(std::isfinite(fit.gemmFlopsPerSecond) && "bisection diverged");
  return fit;
}

llvm::Expected<CostProfile> loadCostProfile(llvm::StringRef path) {
  auto buffer = ir::readInputFile(path, /*allowStdin=*/false, /*isText=*/true);
  if (!buffer)
    return makeError("cost profile: " + errorToString(buffer.takeError()));
  if (auto err = ir::checkJsonDepth((*buffer)->getBuffer(), path))
    return std::move(err);
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return makeError("cost profile '" + path +
                     "' is not JSON: " + errorToString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *nodes = root ? root->getArray("nodes") : nullptr;
  if (!nodes)
    return makeError("cost profile '" + path +
                     "' has no \"nodes\" array (write one with remat-run "
                     "--profile FILE.json)");
  CostProfile profile;
  profile.source = path.str();
  for (const llvm::json::Value &entry : *nodes) {
    const llvm::json::Object *node = entry.getAsObject();
    llvm::Optional<llvm::StringRef> name;
    llvm::Optional<double> seconds;
    if (node) {
      name = node->getString("name");
      seconds = node->getNumber("seconds");
    }
    if (!name || !seconds || !(*seconds >= 0) || !std::isfinite(*seconds))
      return makeError("cost profile '" + path +
                       "': every entry of \"nodes\" needs a \"name\" and "
                       "finite, non-negative \"seconds\"");
    profile.nodeSeconds[*name] = *seconds;
  }
  if (const llvm::json::Value *rates = root->get("rates")) {
    const llvm::json::Object *object = rates->getAsObject();
    if (!object)
      return makeError("cost profile '" + path +
                       "': \"rates\" must be an object");
    for (auto [key, rate] :
         {std::pair{"gemm_flops_per_second", &profile.gemmFlopsPerSecond},
          std::pair{"bytes_per_second", &profile.bytesPerSecond}}) {
      const llvm::json::Value *value = object->get(key);
      if (!value)
        continue;
      llvm::Optional<double> number = value->getAsNumber();
      // The model divides by the rates: a zero, denormal or tiny rate
      // would turn predicted seconds (and the report) into inf or NaN.
      if (!number || !(*number >= 1) || !std::isfinite(*number))
        return makeError("cost profile '" + path + "': rates." + key +
                         " must be a finite number of at least 1 per second");
      *rate = *number;
    }
  }
  return profile;
}

} // namespace remat::passes::recompute
