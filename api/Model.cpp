//===- api/Model.cpp - remat's public C++ API over the session library ----===//
//
// remat/remat.h over the library the tools use too (session/: ModelLoader,
// Pipeline, MemoryReport, Sweep) and the ONNX frontend; nothing of the
// tools' command line (driver/) is linked into libremat.so.
// Every llvm::Error becomes a Status here, with the message the tools print.
//
//===----------------------------------------------------------------------===//
#include "remat/remat.h"

#include "session/MemoryReport.h"
#include "session/ModelLoader.h"
#include "session/Pipeline.h"
#include "session/Sweep.h"
#include "frontends/onnx/OnnxExporter.h"
#include "frontends/onnx/OnnxImporter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Support.h"
#include "passes/FoldingPolicy.h"
#include "passes/Pass.h"
#include "passes/Passes.h"
#include "passes/remat/Solver.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace remat {

struct Model::Impl {
  std::unique_ptr<ir::Graph> graph;
  /// The last pipeline run and the bindings (ONNX metadata on export).
  std::string pipeline;
  std::string bind;
  std::optional<llvm::json::Object> rematReport;
  std::string diagnostics;
};

namespace {

Status toStatus(llvm::Error err) {
  if (!err)
    return Status::success();
  std::string message = errorToString(std::move(err));
  return Status::error(message.empty() ? "unknown error" : message);
}

/// A loaded model's state: \p graph with the optimizer state it was saved
/// with (remat-run --save-weights) adopted, and its bindings.
std::unique_ptr<Model::Impl> adoptLoaded(std::unique_ptr<ir::Graph> graph,
                                         const std::string &bind) {
  passes::adoptOptimizerState(*graph);
  auto impl = std::make_unique<Model::Impl>();
  impl->graph = std::move(graph);
  impl->bind = bind;
  return impl;
}

std::string toJson(llvm::json::Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text;
}

} // namespace

const char *getVersion() { return REMAT_VERSION_STRING; }

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model &&other) noexcept = default;
Model &Model::operator=(Model &&other) noexcept = default;
Model::~Model() = default;

Result<Model> Model::load(std::string_view path, const LoadOptions &options) {
  session::LoadOptions loadOptions;
  loadOptions.bind = options.bind;
  auto graph = session::loadModel(llvm::StringRef(path.data(), path.size()),
                                 loadOptions);
  if (!graph)
    return toStatus(graph.takeError());
  return Model(adoptLoaded(std::move(*graph), options.bind));
}

Result<Model> Model::fromOnnxBytes(std::string_view bytes,
                                   const LoadOptions &options) {
  onnx_frontend::ImportOptions importOptions;
  if (auto err = onnx_frontend::parseBindings(options.bind,
                                              importOptions.bindings))
    return toStatus(std::move(err));
  importOptions.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  auto graph = onnx_frontend::importOnnxBytes(
      llvm::StringRef(bytes.data(), bytes.size()), "<onnx bytes>",
      /*baseDir=*/"", importOptions);
  if (!graph)
    return toStatus(graph.takeError());
  return Model(adoptLoaded(std::move(*graph), options.bind));
}

Result<Model> Model::fromRir(std::string_view text,
                             std::string_view sourceName) {
  auto graph = ir::parseGraph(llvm::StringRef(text.data(), text.size()),
                              llvm::StringRef(sourceName.data(),
                                              sourceName.size()),
                              /*lineOffset=*/0);
  if (!graph)
    return toStatus(graph.takeError());
  auto impl = std::make_unique<Impl>();
  impl->graph = std::move(*graph);
  return Model(std::move(impl));
}

std::string Model::getName() const { return impl_->graph->getName().str(); }

bool Model::isTrainingStep() const {
  return session::isTrainingStep(*impl_->graph);
}

/// Runs \p pipeline on \p impl with \p options' pass options set.
static Status run(Model::Impl &impl, const std::string &pipeline,
                  const session::PipelineOptions &options) {
  llvm::raw_string_ostream diag(impl.diagnostics);
  auto result = session::runPipeline(*impl.graph, pipeline, options, diag);
  if (!result)
    return toStatus(result.takeError());
  impl.pipeline = pipeline;
  if (result->rematReport)
    impl.rematReport = std::move(result->rematReport);
  return Status::success();
}

Status Model::runPipeline(std::string_view pipeline) {
  return run(*impl_, std::string(pipeline), session::PipelineOptions());
}

Status Model::optimize(const OptimizeOptions &options) {
  // The flags' own checks, with remat-opt's messages (ToolFlags::validate).
  if (Status status = checkRematFlags(options.budget, options.strategy);
      !status.ok())
    return status;
  session::PipelineOptions pipelineOptions;
  pipelineOptions.pipeline = options.pipeline;
  pipelineOptions.budget = options.budget;
  pipelineOptions.strategy = options.strategy;
  pipelineOptions.costProfile = options.costProfile;
  // Neither a budget nor a strategy: remat with its defaults, as asked.
  if (options.pipeline.empty() && options.budget.empty() &&
      options.strategy.empty())
    pipelineOptions.strategy = "auto";
  std::string pipeline =
      session::choosePipeline(*impl_->graph, pipelineOptions, "");
  if (auto err = session::checkPipeline(pipeline, pipelineOptions))
    return toStatus(std::move(err));
  return run(*impl_, pipeline, pipelineOptions);
}

std::string Model::getMemoryReportJson() const {
  llvm::json::Object report = session::getMemoryReport(*impl_->graph);
  if (impl_->rematReport)
    report["remat"] = llvm::json::Object(*impl_->rematReport);
  return toJson(std::move(report));
}

std::string Model::getPlanJson() const {
  if (!impl_->rematReport)
    return "null";
  return toJson(llvm::json::Object(*impl_->rematReport));
}

Result<std::string> Model::sweep(const SweepOptions &options) {
  // The passes remat-sweep runs before planning (driver/SweepDriver.cpp).
  std::string pipeline =
      isTrainingStep() ? std::string("schedule")
                       : std::string(session::kTrainingPipeline) + ",schedule";
  if (Status status = run(*impl_, pipeline, session::PipelineOptions());
      !status.ok())
    return status;
  session::SweepOptions sweepOptions;
  sweepOptions.strategies = options.strategies;
  // none first: every ratio is relative to it (as remat-sweep does).
  if (!llvm::is_contained(sweepOptions.strategies, "none"))
    sweepOptions.strategies.insert(sweepOptions.strategies.begin(), "none");
  sweepOptions.budgets = options.budgets;
  sweepOptions.costProfile = options.costProfile;
  session::SweepResult result;
  result.model = getName();
  result.bind = impl_->bind;
  auto rows =
      session::planSweep(*impl_->graph, sweepOptions, result.noRematPeakBytes,
                        result.noRematPredictedSeconds);
  if (!rows)
    return toStatus(rows.takeError());
  result.rows = std::move(*rows);
  session::markParetoFront(result.rows);
  return toJson(session::getSweepJson(result));
}

std::string Model::takeDiagnostics() {
  return std::exchange(impl_->diagnostics, std::string());
}

/// \returns the export options remat-opt gives (metadata included).
static onnx_frontend::ExportOptions getExportOptions(const Model::Impl &impl,
                                                     bool externalData) {
  onnx_frontend::ExportOptions options;
  options.externalData = externalData;
  options.metadata = {{"remat.pipeline", impl.pipeline},
                      {"remat.bind", impl.bind}};
  return options;
}

Result<std::string> Model::toOnnxBytes() const {
  auto bytes = onnx_frontend::exportOnnxBytes(
      *impl_->graph, getExportOptions(*impl_, /*externalData=*/false));
  if (!bytes)
    return toStatus(bytes.takeError());
  return std::move(*bytes);
}

Status Model::writeOnnx(std::string_view path, bool externalData) const {
  return toStatus(onnx_frontend::exportOnnxFile(
      *impl_->graph, llvm::StringRef(path.data(), path.size()),
      getExportOptions(*impl_, externalData)));
}

std::string Model::toRir() const {
  return ir::printGraphToString(*impl_->graph);
}

} // namespace remat
