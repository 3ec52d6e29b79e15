//===- tests/unit/RandomGraphs.h - Seeded random training graphs -*- C++ -*-===//
//
// The random training graphs with dropout that the remat tests share.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_TESTS_UNIT_RANDOMGRAPHS_H
#define REMAT_TESTS_UNIT_RANDOMGRAPHS_H

#include <cstdint>
#include <random>
#include <string>

namespace remat::testing {

/// A random chain of blocks over activations f32[R, C]: each block is a
/// MatMul with a weight, then some of bias Add, Relu/Tanh/Sigmoid/Exp-free
/// elementwise ops, Softmax, LayerNormalization, Dropout (own seed), and a
/// residual Add; side branches join back. The loss is a
/// SoftmaxCrossEntropyLoss or a ReduceSum. With \p rows set, R is \p rows
/// instead of 2..5 (the rest of the graph is the same), so that activations
/// outweigh the C x C weights.
inline std::string randomTrainingGraph(uint64_t seed, int64_t rows = 0) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  int64_t pickedRows = 2 + int64_t(pick(4)), cols = 4 + 4 * int64_t(pick(3));
  if (rows == 0)
    rows = pickedRows;
  std::string type = "f32[" + std::to_string(rows) + "," +
                     std::to_string(cols) + "]";
  std::string weightType =
      "f32[" + std::to_string(cols) + "," + std::to_string(cols) + "]";
  std::string biasType = "f32[" + std::to_string(cols) + "]";
  size_t blocks = 1 + pick(6);
  std::string head = "graph @random(%x: " + type;
  std::string body;
  int counter = 0;
  auto fresh = [&] { return "%v" + std::to_string(counter++); };
  std::string current = "%x";
  body += "  %ratio = Constant() {value = dense<f32[]: 0.25>} : f32[]\n";
  body += "  %train = Constant() {value = dense<bool[]: true>} : bool[]\n";
  for (size_t b = 0; b < blocks; ++b) {
    std::string w = "%w" + std::to_string(b);
    head += ", " + w + ": " + weightType + " weight";
    std::string blockInput = current;
    std::string v = fresh();
    body += "  " + v + " = MatMul(" + current + ", " + w + ") : " + type + "\n";
    current = v;
    size_t ops = 1 + pick(5);
    for (size_t k = 0; k < ops; ++k) {
      std::string out = fresh();
      switch (pick(7)) {
      case 0: {
        std::string bias = "%b" + std::to_string(b) + "_" + std::to_string(k);
        head += ", " + bias + ": " + biasType + " weight";
        body += "  " + out + " = Add(" + current + ", " + bias + ") : " +
                type + "\n";
        break;
      }
      case 1:
        body += "  " + out + " = " +
                std::string(pick(2) ? "Tanh" : "Sigmoid") + "(" + current +
                ") : " + type + "\n";
        break;
      case 2:
        body += "  " + out + " = Softmax(" + current + ") {axis = -1} : " +
                type + "\n";
        break;
      case 3: {
        std::string scale = "%g" + std::to_string(b) + "_" + std::to_string(k);
        head += ", " + scale + ": " + biasType + " weight";
        body += "  " + out + " = LayerNormalization(" + current + ", " +
                scale + ") {axis = -1, epsilon = 0.00001} : " + type + "\n";
        break;
      }
      case 4:
        body += "  " + out + ", " + out + "_mask = Dropout(" + current +
                ", %ratio, %train) {seed = " + std::to_string(seed * 31 + k) +
                "} : " + type + ", bool[" + std::to_string(rows) + "," +
                std::to_string(cols) + "]\n";
        break;
      case 5:
        body += "  " + out + " = Mul(" + current + ", " + current + ") : " +
                type + "\n";
        break;
      default:
        body += "  " + out + " = Add(" + current + ", " + blockInput + ") : " +
                type + "\n";
        break;
      }
      current = out;
    }
  }
  std::string loss = fresh();
  if (pick(2)) {
    head += ", %labels: i64[" + std::to_string(rows) + "]";
    body += "  " + loss + " = SoftmaxCrossEntropyLoss(" + current +
            ", %labels) {reduction = \"mean\"} : f32[]\n";
  } else {
    body += "  " + loss + " = ReduceSum(" + current + ") {keepdims = 0} : f32[]\n";
  }
  return head + ") {\n" + body + "  return " + loss + "\n}\n";
}

} // namespace remat::testing

#endif // REMAT_TESTS_UNIT_RANDOMGRAPHS_H
