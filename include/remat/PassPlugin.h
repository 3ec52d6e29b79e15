//===- remat/PassPlugin.h - Passes loaded into remat-opt --------*- C++ -*-===//
//
// A pass plugin is a shared object that `remat-opt --load-pass-plugin=PATH`
// loads (LLVM's convention, `opt -load-pass-plugin`). It exports one C
// function, rematGetPassPluginInfo, whose RematPassPluginInfo names the
// plugin API and remat version it was built against and a callback that
// adds its passes to the registry; they then show in --list-passes and run
// in -p like the passes of passes/Passes.def:
//
//   extern "C" REMAT_API RematPassPluginInfo rematGetPassPluginInfo() {
//     return {REMAT_PASS_PLUGIN_API_VERSION, REMAT_VERSION_STRING,
//             "rename-nodes", [](remat::passes::PassRegistry &registry) {
//               registry.add("rename-nodes", [] {
//                 return std::make_unique<RenameNodesPass>();
//               });
//             }};
//   }
//
// A pass subclasses remat::passes::Pass (passes/Pass.h), an internal C++
// interface that changes between versions: remat-opt refuses a plugin whose
// API version or remat version differs from its own. The plugin is built
// against remat's source tree (examples/plugin) and resolves remat's
// symbols from remat-opt, which exports them.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSPLUGIN_H
#define REMAT_PASSPLUGIN_H

#include "remat/Export.h"
#include "remat/Version.h"

#include <cstdint>

/// The layout of RematPassPluginInfo; bumped when it changes.
#define REMAT_PASS_PLUGIN_API_VERSION 1

namespace remat::passes {
class PassRegistry;
} // namespace remat::passes

/// What a plugin's rematGetPassPluginInfo returns.
struct RematPassPluginInfo {
  /// REMAT_PASS_PLUGIN_API_VERSION when the plugin was built.
  uint32_t apiVersion;
  /// REMAT_VERSION_STRING when the plugin was built.
  const char *rematVersion;
  /// The plugin's name, for messages.
  const char *pluginName;
  /// Adds the plugin's passes to \p registry (PassRegistry::add).
  void (*registerPasses)(remat::passes::PassRegistry &registry);
};

/// The name of the entry point remat-opt looks up.
#define REMAT_PASS_PLUGIN_ENTRY_POINT "rematGetPassPluginInfo"

#endif // REMAT_PASSPLUGIN_H
