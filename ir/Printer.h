//===- ir/Printer.h - The .rir text format: printing ------------*- C++ -*-===//
#ifndef REMAT_IR_PRINTER_H
#define REMAT_IR_PRINTER_H

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace remat::ir {

/// Prints \p graph in the .rir format of DESIGN.md. Output is deterministic
/// and parse(print(g)) is equal to g (graphsEqual), weight data included.
void printGraph(const Graph &graph, llvm::raw_ostream &os);

/// \returns printGraph's output as a string.
std::string printGraphToString(const Graph &graph);

/// Prints \p type as in .rir ("f32[2,3]").
void printType(const TensorType &type, llvm::raw_ostream &os);
/// Prints an attribute value as in .rir.
void printAttrValue(const AttrValue &value, llvm::raw_ostream &os);
/// Prints a value reference: "%name", or %"name" when the name has
/// characters outside [A-Za-z0-9_.$/-].
void printValueRef(llvm::StringRef name, llvm::raw_ostream &os);

} // namespace remat::ir

#endif // REMAT_IR_PRINTER_H
