//===- remat/Export.h - Symbol visibility of the public API -----*- C++ -*-===//
//
// libremat.so is built with -fvisibility=hidden and a linker version script
// (api/libremat.map); REMAT_API marks what it exports: the C API of
// remat-c/remat.h and the C++ API of remat/remat.h.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_EXPORT_H
#define REMAT_EXPORT_H

#if defined(_WIN32)
#define REMAT_API
#else
#define REMAT_API __attribute__((visibility("default")))
#endif

#endif // REMAT_EXPORT_H
