//===- ir/Ops.cpp - The op table ------------------------------------------===//
#include "ir/Ops.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <cassert>
#include <string>

namespace remat::ir {

static const OpInfo kOpInfos[] = {
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS,  \
           TRAITS, COST, INFER, KERNEL, GRAD_OPERANDS, ONNX_SINCE, SUMMARY)     \
  {#NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS,        \
   uint32_t(TRAITS), CostClass::COST, GRAD_OPERANDS, ONNX_SINCE, SUMMARY},
#include "ir/Ops.def"
};

static const OpKind kAllOps[] = {
#define OP(NAME, ...) OpKind::NAME,
#include "ir/Ops.def"
};

const OpInfo &getOpInfo(OpKind op) { return kOpInfos[size_t(op)]; }

llvm::ArrayRef<OpKind> allOps() { return kAllOps; }

bool hasTrait(OpKind op, OpTrait trait) {
  return (getOpInfo(op).traits & trait) != 0;
}

bool isGradOperand(OpKind op, unsigned index) {
  assert(hasTrait(op, kDifferentiable) && "not a differentiable op");
  OperandSet operands = getOpInfo(op).gradOperands;
  if (operands == kAllOperands)
    return true;
  return index < 32 && (operands >> index & 1) != 0;
}

llvm::StringRef costClassName(CostClass cost) {
  switch (cost) {
  case CostClass::Free:
    return "Free";
  case CostClass::MemoryBound:
    return "MemoryBound";
  case CostClass::Reduction:
    return "Reduction";
  case CostClass::Gemm:
    return "Gemm";
  }
  llvm_unreachable("unknown cost class");
}

std::optional<OpKind> lookupOp(llvm::StringRef domain, llvm::StringRef name) {
  if (domain == "ai.onnx")
    domain = "";
  // Keyed by "domain.name"; built once, read-only afterwards.
  static const llvm::StringMap<OpKind> table = [] {
    llvm::StringMap<OpKind> map;
    for (OpKind op : kAllOps) {
      const OpInfo &info = getOpInfo(op);
      map[(llvm::Twine(info.domain) + "." + info.name).str()] = op;
    }
    return map;
  }();
  auto it = table.find((llvm::Twine(domain) + "." + name).str());
  if (it == table.end())
    return std::nullopt;
  return it->second;
}

std::string getOpSpelling(OpKind op) {
  const OpInfo &info = getOpInfo(op);
  if (info.domain.empty())
    return info.name.str();
  return (llvm::Twine(info.domain) + "." + info.name).str();
}

} // namespace remat::ir
