//===- api/CApiModel.h - The C API's model handle --------------*- C++ -*-===//
//
// What a RematModel * points to (remat-c/remat.h declares it opaque). Not
// installed: api/CApi.cpp and tests/install/ApiLockTest.cpp, which holds a
// model's lock from outside to check that every call on the model waits for
// it, read it. Nothing here is exported from libremat.so.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_API_CAPIMODEL_H
#define REMAT_API_CAPIMODEL_H

#include "remat/remat.h"

#include <mutex>

struct RematModel {
  remat::Model model;
  /// Held by every call on the model (const ones too: they read the graph
  /// a call on another thread may be rewriting).
  mutable std::mutex mutex;
};

#endif // REMAT_API_CAPIMODEL_H
