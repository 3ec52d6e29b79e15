//===- ir/OutputFile.h - Writing outputs atomically ---------*- C++ -*-===//
#ifndef REMAT_IR_OUTPUTFILE_H
#define REMAT_IR_OUTPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace remat {

/// Writes \p contents to \p path ("-" is stdout). A file is written to a
/// temporary beside \p path and renamed over it only when complete, so an
/// error never leaves a partial or clobbered file.
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef contents);

} // namespace remat

#endif // REMAT_IR_OUTPUTFILE_H
