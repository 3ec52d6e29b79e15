/*===- remat-c/remat.h - remat's C API ----------------------------*- C -*-===//
 *
 * The C API of libremat, over remat/remat.h. Every object is an opaque
 * handle that its create function makes and its destroy function frees
 * (destroying NULL does nothing). A function that can fail returns a
 * RematStatus: NULL on success, otherwise an error whose message is the one
 * the tools print after "error: "; the caller destroys it. No C++ exception
 * crosses this API. A NULL handle, buffer or out-pointer is an error status
 * (rematBufferGetData/GetSize of NULL: "" and 0), never a crash. A model may
 * be used from several threads: each call on it holds the model's lock, so
 * the calls take turns. rematModelDestroy takes no lock: destroy a model
 * once no other thread is using it.
 *
 *   RematModel *model = NULL;
 *   RematStatus *status = rematModelLoad("bert.onnx", "batch=8,seq=512",
 *                                        &model);
 *   if (!status)
 *     status = rematModelOptimize(model, "6GiB", "auto");
 *   if (!status)
 *     status = rematModelWriteOnnx(model, "bert.remat.onnx");
 *   if (status) {
 *     fprintf(stderr, "error: %s\n", rematStatusGetMessage(status));
 *     rematStatusDestroy(status);
 *   }
 *   rematModelDestroy(model);
 *
 *===----------------------------------------------------------------------===*/
#ifndef REMAT_C_REMAT_H
#define REMAT_C_REMAT_H

#include "remat/Export.h"
#include "remat/Version.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Why a call failed (NULL: it did not). */
typedef struct RematStatus RematStatus;
/** One model (remat::Model). */
typedef struct RematModel RematModel;
/** Bytes a call returned (ONNX, JSON, .rir), followed by a NUL byte. */
typedef struct RematBuffer RematBuffer;

/** \returns the library's version, "0.1.0" (REMAT_VERSION_STRING is the
 * headers'). */
REMAT_API const char *rematGetVersion(void);

/** \returns the message of \p status: one or more lines without "error: ".
 * Valid until the status is destroyed. */
REMAT_API const char *rematStatusGetMessage(const RematStatus *status);
REMAT_API void rematStatusDestroy(RematStatus *status);

/** \returns the bytes of \p buffer (NUL-terminated), valid until it is
 * destroyed. */
REMAT_API const char *rematBufferGetData(const RematBuffer *buffer);
/** \returns the number of bytes, the final NUL not counted. */
REMAT_API size_t rematBufferGetSize(const RematBuffer *buffer);
REMAT_API void rematBufferDestroy(RematBuffer *buffer);

/** Reads \p path by its extension (.onnx, .rir, BERT config .json) into a
 * new model in \p *model. \p bind ("batch=8,seq=512") may be NULL. */
REMAT_API RematStatus *rematModelLoad(const char *path, const char *bind,
                                      RematModel **model);
/** Reads a serialized ONNX ModelProto of \p size bytes. A tensor with
 * external data is an error (there is no folder to read it from). */
REMAT_API RematStatus *rematModelLoadOnnxBytes(const void *data, size_t size,
                                               const char *bind,
                                               RematModel **model);
/** As rematModelLoadOnnxBytes, with external data read from \p baseDir as
 * if the model were a file there: a location must stay inside \p baseDir
 * once every symbolic link is followed. \p baseDir NULL or "": none. */
REMAT_API RematStatus *
rematModelLoadOnnxBytesWithBaseDir(const void *data, size_t size,
                                   const char *baseDir, const char *bind,
                                   RematModel **model);
/** Parses one graph of .rir text. */
REMAT_API RematStatus *rematModelLoadRir(const char *text, RematModel **model);
REMAT_API void rematModelDestroy(RematModel *model);

/** Runs a pass pipeline ("canonicalize,autodiff,dce"), as remat-opt -p. */
REMAT_API RematStatus *rematModelRunPipeline(RematModel *model,
                                             const char *pipeline);
/** Runs the remat pipeline with \p budget ("6GiB", "40%") and \p strategy
 * ("auto"), as remat-opt --budget --strategy; either may be NULL. */
REMAT_API RematStatus *rematModelOptimize(RematModel *model,
                                          const char *budget,
                                          const char *strategy);

/** The memory report as JSON (docs/memory-report.md), in a new buffer. */
REMAT_API RematStatus *rematModelGetMemoryReport(const RematModel *model,
                                                 RematBuffer **json);
/** The remat pass's decisions as JSON ("null" before remat ran). */
REMAT_API RematStatus *rematModelGetPlan(const RematModel *model,
                                         RematBuffer **json);
/** The serialized ONNX ModelProto, in a new buffer. */
REMAT_API RematStatus *rematModelToOnnx(const RematModel *model,
                                        RematBuffer **onnx);
/** Writes ONNX to \p path. */
REMAT_API RematStatus *rematModelWriteOnnx(const RematModel *model,
                                           const char *path);

#ifdef __cplusplus
}
#endif

#endif /* REMAT_C_REMAT_H */
