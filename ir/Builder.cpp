//===- ir/Builder.cpp - Creating nodes with inferred types ----------------===//
#include "ir/Builder.h"

#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/Twine.h"

namespace remat::ir {

llvm::Expected<Node *> Builder::create(OpKind op,
                                       llvm::ArrayRef<Value *> operands,
                                       AttrList attrs, unsigned numResults,
                                       llvm::StringRef name) {
  llvm::SmallVector<TensorType, 2> placeholderTypes(numResults);
  llvm::SmallVector<std::string, 2> names;
  for (unsigned i = 0; i < numResults; ++i) {
    std::string base = name.empty() ? "t" : name.str();
    if (i > 0 && !name.empty())
      base = (llvm::Twine(base) + "." + llvm::Twine(i)).str();
    names.push_back(graph_.uniqueName(base));
  }
  // uniqueName() reserves nothing, so names of one node may still collide
  // with each other ("y" taken: "y.1" for result 0, "y.1" again for 1).
  for (unsigned i = 1; i < numResults; ++i)
    for (unsigned j = 0; j < i; ++j)
      if (names[i] == names[j])
        names[i] = (llvm::Twine(names[j]) + "." + llvm::Twine(i)).str();
  Node *node = graph_.createNode(op, operands, placeholderTypes, names,
                                 std::move(attrs), insertBefore_);
  node->setStage(stage_);
  node->setLayer(layer_);
  auto inferred = inferTypes(*node);
  if (!inferred) {
    node->dropAllOperands();
    graph_.eraseNode(node);
    return inferred.takeError();
  }
  for (unsigned i = 0; i < numResults; ++i) {
    const InferredType &type = (*inferred)[i];
    if (!type.shapeKnown) {
      std::string message = node->describe() +
                            ": result shape depends on an operand that is "
                            "not a constant";
      node->dropAllOperands();
      graph_.eraseNode(node);
      return makeError(message);
    }
    node->getResult(i)->setType(type.type);
  }
  return node;
}

llvm::Expected<Value *> Builder::createValue(OpKind op,
                                             llvm::ArrayRef<Value *> operands,
                                             AttrList attrs,
                                             llvm::StringRef name) {
  auto node = create(op, operands, std::move(attrs), 1, name);
  if (!node)
    return node.takeError();
  return (*node)->getResult(0);
}

Value *Builder::createConstant(TensorDataPtr data, llvm::StringRef name) {
  TensorType type = data->getType();
  AttrList attrs;
  attrs.set("value", std::move(data));
  Node *node = graph_.createNode(OpKind::Constant, {}, {type},
                                 {graph_.uniqueName(name.empty() ? "t" : name)},
                                 std::move(attrs), insertBefore_);
  node->setStage(stage_);
  node->setLayer(layer_);
  return node->getResult(0);
}

} // namespace remat::ir
