//===- tests/unit/ExternOpTest.cpp - remat.Extern -------------------------===//
//
// remat.Extern, the op another front end (remat.torch) writes for what remat
// has no kernel for: its results are as declared, its attributes are
// checked, the remat cost model reads its class, FLOPs and bytes, and the
// CPU backend and the ONNX exporter refuse it with a message naming it.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxExporter.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "passes/remat/CostModel.h"
#include "runtime/cpu/Kernels.h"

#include <doctest/doctest.h>

#include <string>

using namespace remat;
using namespace remat::passes::recompute;

namespace {

/// \returns the graph of one remat.Extern node with \p attrs, or the error.
llvm::Expected<std::unique_ptr<ir::Graph>> parseExtern(const std::string &attrs) {
  std::string text =
      "graph @g(%x: f32[4,8], %w: f32[8,16] weight) {\n"
      "  %y = remat.Extern(%x, %w) {" + attrs + "} : f32[4,16]\n"
      "  return %y\n}\n";
  return ir::parseGraph(text, "extern.rir");
}

std::string errorOf(const std::string &attrs) {
  auto graph = parseExtern(attrs);
  if (graph)
    return "ok";
  return errorToString(graph.takeError());
}

} // namespace

TEST_CASE("remat.Extern keeps its declared types and checks its attributes") {
  CHECK(errorOf("target = \"aten.mm.default\"") == "ok");
  CHECK(errorOf("target = \"aten.mm.default\", cost = \"gemm\", flops = 1024, "
                "bytes = 0") == "ok");
  CHECK(errorOf("cost = \"gemm\"").find(
            "needs a non-empty string attribute 'target'") !=
        std::string::npos);
  CHECK(errorOf("target = \"\"").find("'target'") != std::string::npos);
  CHECK(errorOf("target = \"aten.mm\", cost = \"fast\"")
            .find("attribute 'cost' is \"fast\"; expected \"gemm\", "
                  "\"memory\" or \"free\"") != std::string::npos);
  CHECK(errorOf("target = \"aten.mm\", flops = -1")
            .find("attribute 'flops' is -1; it must be at least 0") !=
        std::string::npos);
}

TEST_CASE("the remat cost model reads remat.Extern's class, FLOPs and bytes") {
  auto gemm = parseExtern(
      "target = \"aten.mm.default\", cost = \"gemm\", flops = 4000, bytes = 96");
  REQUIRE_MESSAGE(bool(gemm), errorToString(gemm.takeError()));
  const ir::Node &mm = (*gemm)->getNodes().front();
  CHECK(getCostKind(mm) == CostKind::Gemm);
  CHECK(nodeFlops(mm) == 4000);
  CHECK(nodeBytes(mm) == 96);
  CostProfile profile;
  CHECK(nodeSeconds(mm, profile) ==
        doctest::Approx(profile.nodeOverheadSeconds +
                        4000 / profile.gemmFlopsPerSecond));

  // No class: memory-bound, its bytes those of its operands and results.
  auto plain = parseExtern("target = \"aten.gelu.default\"");
  REQUIRE_MESSAGE(bool(plain), errorToString(plain.takeError()));
  const ir::Node &gelu = (*plain)->getNodes().front();
  CHECK(getCostKind(gelu) == CostKind::MemoryBound);
  CHECK(nodeBytes(gelu) == 4 * (4 * 8 + 8 * 16 + 4 * 16));

  auto view = parseExtern("target = \"aten.t\", cost = \"free\"");
  REQUIRE_MESSAGE(bool(view), errorToString(view.takeError()));
  CHECK(nodeSeconds((*view)->getNodes().front(), profile) == 0);
}

TEST_CASE("the CPU backend and the ONNX exporter refuse remat.Extern") {
  auto graph = parseExtern("target = \"aten.mm.default\"");
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  auto kernel = runtime::cpu::selectKernel((*graph)->getNodes().front());
  REQUIRE(!kernel);
  CHECK(errorToString(kernel.takeError())
            .find("remat.Extern ('aten.mm.default') has no kernel") !=
        std::string::npos);
  auto bytes = onnx_frontend::exportOnnxBytes(**graph, {});
  REQUIRE(!bytes);
  CHECK(errorToString(bytes.takeError())
            .find("no decomposition of remat.Extern") != std::string::npos);
}
