//===- remat/remat.h - remat's public C++ API -------------------*- C++ -*-===//
//
// The small, stable C++ API of libremat: load a model (ONNX bytes or file,
// .rir text or file, a BERT config), bind its symbolic dims, run a pass
// pipeline or remat with a budget and a strategy, read the memory report and
// the plan, write ONNX. It uses only the standard library: no LLVM type and
// no exception crosses it; every failure is a Status holding the message
// the tools print after "error: ".
//
//   remat::Result<remat::Model> model =
//       remat::Model::load("bert.onnx", {.bind = "batch=8,seq=512"});
//   if (!model.ok()) { puts(model.status().message().c_str()); return 1; }
//   remat::Status status = model->optimize({.budget = "6GiB"});
//   ... model->writeOnnx("bert.remat.onnx") ...
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_REMAT_H
#define REMAT_REMAT_H

#include "remat/Export.h"
#include "remat/Version.h"

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

/// \returns the version of the library ("0.1.0"), which may differ from
/// REMAT_VERSION_STRING, the version of the headers a program was built with.
REMAT_API const char *getVersion();

/// Success, or an error with the message remat's tools print after
/// "error: " (several lines when several things failed; the lines after the
/// first start with "note: ").
class Status {
public:
  /// \returns a success.
  static Status success() { return Status(); }
  /// \returns an error with \p message (not empty).
  static Status error(std::string message) {
    assert(!message.empty() && "an error needs a message");
    Status status;
    status.message_ = std::move(message);
    return status;
  }
  bool ok() const { return message_.empty(); }
  /// The message; empty on success.
  const std::string &message() const { return message_; }

private:
  std::string message_;
};

/// A value of type T, or the Status of why there is none.
template <typename T> class Result {
public:
  Result(T value) : value_(std::move(value)) {}
  /// \p status must be an error.
  Result(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "a Result without a value needs an error");
  }
  bool ok() const { return value_.has_value(); }
  /// Success when there is a value.
  const Status &status() const { return status_; }
  T &value() {
    assert(ok() && "value() of an error");
    return *value_;
  }
  const T &value() const {
    assert(ok() && "value() of an error");
    return *value_;
  }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

private:
  std::optional<T> value_;
  Status status_;
};

/// How to read a model.
struct LoadOptions {
  /// The symbolic dims of an ONNX model, or the batch and sequence length of
  /// a BERT config: "batch=8,seq=512" (remat-opt --bind). .rir dims are
  /// static: a binding is an error there.
  std::string bind;
};

/// What optimize() does: remat-opt's --budget, --strategy and -p.
struct OptimizeOptions {
  /// The activation budget: "6GiB", "512MiB", a byte count, or "40%" of the
  /// planned peak without remat. "" with a strategy: the strategy's default.
  std::string budget;
  /// none, auto, or one of the remat pass's fixed strategies ("" = auto
  /// when a budget is given).
  std::string strategy;
  /// The pipeline, as remat-opt -p takes it; "" for the default one:
  /// canonicalize,autodiff,dce (unless the model already is a training
  /// step), schedule, remat, plan-memory.
  std::string pipeline;
  /// A remat-run --profile JSON for the remat cost model ("" = built in).
  std::string costProfile;
};

/// What sweep() plans: remat-sweep's --strategies and --budgets.
struct SweepOptions {
  /// Strategy names; none is added first when absent.
  std::vector<std::string> strategies = {"auto"};
  /// "40%", a byte size ("2GiB"), or "min".
  std::vector<std::string> budgets = {"100%", "80%", "60%", "40%", "min"};
  std::string costProfile;
};

/// One graph: a model, later a training step planned into one arena.
/// Movable, not copyable. Not synchronized: calls on one Model from several
/// threads at once must be serialized by the caller (the C API's
/// RematModel does this with a lock).
class REMAT_API Model {
public:
  /// Reads \p path by its extension: .onnx, .rir, or a BERT config .json.
  static Result<Model> load(std::string_view path,
                            const LoadOptions &options = {});
  /// Reads a serialized ONNX ModelProto (all data inline: a tensor with
  /// external data is an error, as there is no folder to read it from).
  static Result<Model> fromOnnxBytes(std::string_view bytes,
                                     const LoadOptions &options = {});
  /// Reads a serialized ONNX ModelProto whose external data lies in
  /// \p baseDir, as if the model were a file there: a location must stay
  /// inside \p baseDir once every symbolic link is followed.
  static Result<Model> fromOnnxBytes(std::string_view bytes,
                                     std::string_view baseDir,
                                     const LoadOptions &options);
  /// Parses one graph of .rir text; \p sourceName is used in messages.
  static Result<Model> fromRir(std::string_view text,
                               std::string_view sourceName = "<rir>");

  Model(Model &&other) noexcept;
  Model &operator=(Model &&other) noexcept;
  ~Model();

  /// The graph's name.
  std::string getName() const;
  /// \returns whether the graph already is a training step (it has weight
  /// gradients or updates as outputs).
  bool isTrainingStep() const;

  /// Runs the pass pipeline \p pipeline ("canonicalize,autodiff,dce"), as
  /// remat-opt -p does. On an error the model is left as the failing pass
  /// left it.
  Status runPipeline(std::string_view pipeline);
  /// Runs the remat pipeline with \p options, as remat-opt --budget
  /// --strategy does.
  Status optimize(const OptimizeOptions &options);

  /// The memory report of the graph as it is now, as JSON: the fields of
  /// docs/memory-report.md, with the remat pass's decisions under "remat"
  /// when remat ran.
  std::string getMemoryReportJson() const;
  /// The remat pass's decisions (the plan: each tensor kept or recomputed)
  /// as JSON, or "null" before remat ran.
  std::string getPlanJson() const;
  /// Plans every (strategy, budget) point of \p options and \returns the
  /// sweep as remat-sweep --json writes it. The model is first made a
  /// scheduled training step (the passes remat-sweep runs), then left so.
  Result<std::string> sweep(const SweepOptions &options);
  /// Warnings and notes the passes printed since the last call.
  std::string takeDiagnostics();

  /// \returns the serialized ONNX ModelProto (data inline; under 2 GB).
  Result<std::string> toOnnxBytes() const;
  /// Writes ONNX to \p path, with the weights in `<path>.data` when
  /// \p externalData is set or the model is 2 GB or more.
  Status writeOnnx(std::string_view path, bool externalData = false) const;
  /// \returns the graph as .rir text.
  std::string toRir() const;

  /// The implementation (internal).
  struct Impl;

private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Checks a budget ("6GiB", "40%"; "" for none) and a strategy ("" for the
/// default) as remat-opt checks --budget and --strategy, with its messages.
REMAT_API Status checkRematFlags(const std::string &budget,
                                 const std::string &strategy);

/// What planJointGraph() does: the remat pass's budget, strategy,
/// cost-profile and explain options.
struct JointPlanOptions {
  /// As OptimizeOptions::budget; "" with strategy none.
  std::string budget;
  std::string strategy = "auto";
  std::string costProfile;
  /// Put remat-opt --explain's table into JointPlan::diagnostics.
  bool explain = false;
  /// Also find the smallest planned peak any plan reaches (a second search).
  bool smallest = false;
};

/// The plan of a joint training step.
struct JointPlan {
  /// The graph inputs and forward values that backward reads once the plan
  /// is applied (recompute nodes included), in the order first read:
  /// everything else backward needs from forward is recomputed.
  std::vector<std::string> kept;
  /// The memory report of the planned step with the remat pass's decisions
  /// under "remat" (one graph of remat-opt --report).
  std::string reportJson;
  /// The planned peak (persistent + arena) of the step under the plan, and
  /// without remat.
  uint64_t plannedPeakBytes = 0;
  uint64_t noRematPeakBytes = 0;
  /// The smallest planned peak of any plan (JointPlanOptions::smallest).
  uint64_t smallestPeakBytes = 0;
  /// What the passes printed: the --explain table, warnings.
  std::string diagnostics;
};

/// Plans a training step another front end wrote (remat.torch's joint
/// forward+backward graph) as one graph of .rir text: forward nodes, then
/// backward ones (stage bwd), ops remat has no kernel for as remat.Extern.
/// The graph's order is its schedule. Only plans whose backward reads a set
/// of saved values and rebuilds each other value once are candidates: no
/// nested groups, no chunked loss head or attention core (the remat pass's
/// nested, chunk-loss and chunk-attention options off). An impossible
/// budget is remat-opt's error naming the smallest feasible planned peak of
/// those plans.
REMAT_API Result<JointPlan> planJointGraph(std::string_view rirText,
                                           const JointPlanOptions &options);

} // namespace remat

#endif // REMAT_REMAT_H
