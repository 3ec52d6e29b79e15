//===- ir/Parser.h - The .rir text format: parsing --------------*- C++ -*-===//
#ifndef REMAT_IR_PARSER_H
#define REMAT_IR_PARSER_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace remat::ir {

/// Parses one graph from \p text. \p sourceName names the file in messages,
/// which read "<sourceName>:<line>:<col>: <what is wrong>". Every node's
/// declared result types are checked against shape inference. Forward
/// references parse, so that a cycle or misordered schedule is reported by
/// the Verifier (which the caller runs) rather than as an undefined value.
/// \p lineOffset is added to line numbers (for --split-input-file chunks).
llvm::Expected<std::unique_ptr<Graph>>
parseGraph(llvm::StringRef text, llvm::StringRef sourceName,
           unsigned lineOffset = 0);

} // namespace remat::ir

#endif // REMAT_IR_PARSER_H
