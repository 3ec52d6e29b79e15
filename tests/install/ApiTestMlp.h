//===- tests/install/ApiTestMlp.h - The API tests' model -------*- C++ -*-===//
#ifndef REMAT_TESTS_INSTALL_APITESTMLP_H
#define REMAT_TESTS_INSTALL_APITESTMLP_H

/// Needs 16 floats for %a and %b; a small training step after autodiff.
inline const char *const kMlp =
    R"(graph @mlp(%x: f32[2,4], %w: f32[4,4] weight) {
  %h = MatMul(%x, %w) : f32[2,4]
  %a = Relu(%h) : f32[2,4]
  %s = ReduceSum(%a) {keepdims = 0} : f32[]
  return %s
}
)";

#endif // REMAT_TESTS_INSTALL_APITESTMLP_H
