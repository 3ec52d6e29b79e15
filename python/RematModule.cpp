//===- python/RematModule.cpp - The remat._remat extension ----------------===//
//
// nanobind bindings of remat/remat.h for the Python package (python/remat):
// a Model class whose methods raise remat.Error, with the message the tools
// print, on a failed Status. The Python functions optimize, plan and sweep
// are written over it in python/remat/__init__.py; plan_joint_graph is what
// remat.torch's partition function asks (python/remat/torch.py).
//
//===----------------------------------------------------------------------===//
#include "remat/remat.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>

namespace nb = nanobind;

namespace {

/// A failed remat::Status on its way to Python, where it is remat.Error.
class RematError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

void check(const remat::Status &status) {
  if (!status.ok())
    throw RematError(status.message());
}

template <typename T> T take(remat::Result<T> result) {
  check(result.status());
  return std::move(*result);
}

} // namespace

NB_MODULE(_remat, m) {
  m.doc() = "remat's C++ API (remat/remat.h); use the functions of remat";
  nb::exception<RematError>(m, "Error");
  m.def("version", [] { return std::string(remat::getVersion()); });

  m.def(
      "check_remat_flags",
      [](const std::string &budget, const std::string &strategy) {
        check(remat::checkRematFlags(budget, strategy));
      },
      nb::arg("budget"), nb::arg("strategy"));
  m.def(
      "plan_joint_graph",
      [](const std::string &text, const std::string &budget,
         const std::string &strategy, const std::string &costProfile,
         bool explain, bool smallest) {
        remat::JointPlanOptions options;
        options.budget = budget;
        options.strategy = strategy;
        options.costProfile = costProfile;
        options.explain = explain;
        options.smallest = smallest;
        remat::JointPlan plan = take(remat::planJointGraph(text, options));
        nb::dict result;
        result["kept"] = nb::cast(plan.kept);
        result["report_json"] = plan.reportJson;
        result["predicted_peak"] = plan.plannedPeakBytes;
        result["no_remat_peak"] = plan.noRematPeakBytes;
        result["smallest_feasible"] =
            smallest ? nb::cast(plan.smallestPeakBytes) : nb::none();
        result["diagnostics"] = plan.diagnostics;
        return result;
      },
      nb::arg("text"), nb::arg("budget") = "", nb::arg("strategy") = "auto",
      nb::arg("cost_profile") = "", nb::arg("explain") = false,
      nb::arg("smallest") = false,
      "Plans a joint training step in .rir text (remat::planJointGraph).");

  nb::class_<remat::Model>(m, "Model")
      .def_static(
          "load",
          [](const std::string &path, const std::string &bind) {
            return take(remat::Model::load(path, {bind}));
          },
          nb::arg("path"), nb::arg("bind") = "")
      .def_static(
          "from_onnx_bytes",
          [](nb::bytes bytes, const std::string &bind,
             const std::string &baseDir) {
            std::string_view view(bytes.c_str(), bytes.size());
            return take(remat::Model::fromOnnxBytes(view, baseDir, {bind}));
          },
          nb::arg("data"), nb::arg("bind") = "", nb::arg("base_dir") = "")
      .def_static(
          "from_rir",
          [](const std::string &text) {
            return take(remat::Model::fromRir(text));
          },
          nb::arg("text"))
      .def_prop_ro("name", &remat::Model::getName)
      .def("is_training_step", &remat::Model::isTrainingStep)
      .def(
          "run_pipeline",
          [](remat::Model &model, const std::string &pipeline) {
            check(model.runPipeline(pipeline));
          },
          nb::arg("pipeline"))
      .def(
          "optimize",
          [](remat::Model &model, const std::string &budget,
             const std::string &strategy, const std::string &pipeline,
             const std::string &costProfile) {
            check(model.optimize({budget, strategy, pipeline, costProfile}));
          },
          nb::arg("budget") = "", nb::arg("strategy") = "",
          nb::arg("pipeline") = "", nb::arg("cost_profile") = "")
      .def("memory_report_json", &remat::Model::getMemoryReportJson)
      .def("plan_json", &remat::Model::getPlanJson)
      .def(
          "sweep_json",
          [](remat::Model &model, const std::vector<std::string> &strategies,
             const std::vector<std::string> &budgets,
             const std::string &costProfile) {
            return take(model.sweep({strategies, budgets, costProfile}));
          },
          nb::arg("strategies"), nb::arg("budgets"),
          nb::arg("cost_profile") = "")
      .def("take_diagnostics", &remat::Model::takeDiagnostics)
      .def("to_onnx_bytes",
           [](const remat::Model &model) {
             std::string bytes = take(model.toOnnxBytes());
             return nb::bytes(bytes.data(), bytes.size());
           })
      .def(
          "write_onnx",
          [](const remat::Model &model, const std::string &path,
             bool externalData) { check(model.writeOnnx(path, externalData)); },
          nb::arg("path"), nb::arg("external_data") = false)
      .def("to_rir", &remat::Model::toRir);
}
