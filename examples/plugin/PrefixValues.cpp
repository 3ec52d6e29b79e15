//===- examples/plugin/PrefixValues.cpp - An example pass plugin ----------===//
//
// A pass plugin for remat-opt (remat/PassPlugin.h): the pass
// `prefix-values{prefix=p_}` renames every value a node defines by putting
// the prefix in front of its name, and notes how many it renamed.
//
//   remat-opt model.rir -p 'prefix-values{prefix=p_}'
//       --load-pass-plugin=libremat-example-plugin.so
//
// Given:   %a = Relu(%x)
// Execute: prefix-values{prefix=p_}
// Result:  %p_a = Relu(%x)
//
//===----------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/PassManager.h"
#include "remat/PassPlugin.h"

#include <memory>

// The version the plugin claims: its build's, unless the test of a plugin
// built for another version overrides it.
#ifndef EXAMPLE_PLUGIN_REMAT_VERSION
#define EXAMPLE_PLUGIN_REMAT_VERSION REMAT_VERSION_STRING
#endif

namespace {

class PrefixValuesPass : public remat::passes::Pass {
public:
  PrefixValuesPass() {
    declareOption("prefix", "what to put in front of each node result's name",
                  &prefix_);
  }
  llvm::StringRef getName() const override { return "prefix-values"; }
  llvm::StringRef getSummary() const override {
    return "prefix the name of every value a node defines (example plugin)";
  }

  llvm::Expected<bool> run(remat::ir::Graph &graph) override {
    if (prefix_.empty())
      return false;
    unsigned renamed = 0;
    for (remat::ir::Node &node : graph.getNodes())
      for (remat::ir::Value *result : node.getResults()) {
        result->setName(prefix_ + result->getName().str());
        ++renamed;
      }
    emitNote("prefix-values: renamed " + llvm::Twine(renamed) + " values");
    return renamed != 0;
  }

private:
  std::string prefix_ = "p_";
};

void registerPasses(remat::passes::PassRegistry &registry) {
  registry.add("prefix-values", [] { return std::make_unique<PrefixValuesPass>(); });
}

} // namespace

extern "C" REMAT_API RematPassPluginInfo rematGetPassPluginInfo() {
  return {REMAT_PASS_PLUGIN_API_VERSION, EXAMPLE_PLUGIN_REMAT_VERSION,
          "prefix-values", registerPasses};
}
