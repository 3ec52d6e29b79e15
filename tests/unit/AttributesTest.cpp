//===- tests/unit/AttributesTest.cpp - AttrList and TensorData ------------===//
#include "ir/Attributes.h"

#include <doctest/doctest.h>

using namespace remat::ir;

TEST_CASE("attribute lists stay sorted and typed") {
  AttrList attrs;
  attrs.set("seed", int64_t(7));
  attrs.set("axis", int64_t(-1));
  attrs.set("ratio", 0.1f);
  REQUIRE(attrs.size() == 3);
  CHECK(attrs.entries()[0].first == "axis");
  CHECK(attrs.entries()[1].first == "ratio");
  CHECK(attrs.entries()[2].first == "seed");
  CHECK(attrs.getInt("seed") == 7);
  CHECK_FALSE(attrs.getInt("ratio").has_value()); // A float, not an int.
  CHECK(attrs.getFloat("ratio") == 0.1f);
  attrs.set("seed", int64_t(9));
  CHECK(attrs.size() == 3);
  CHECK(attrs.getInt("seed") == 9);
  CHECK(attrs.remove("axis"));
  CHECK_FALSE(attrs.remove("axis"));
  CHECK_FALSE(attrs.has("axis"));
  CHECK(attrKindName(*attrs.find("ratio")) == "float");
}

TEST_CASE("attribute equality compares contents") {
  AttrList a, b;
  a.set("perm", std::vector<int64_t>{1, 0});
  b.set("perm", std::vector<int64_t>{1, 0});
  CHECK(a == b);
  b.set("perm", std::vector<int64_t>{0, 1});
  CHECK(a != b);
  auto t1 = TensorData::fromInts(TensorType(DType::I64, {2}), {3, 4});
  auto t2 = TensorData::fromInts(TensorType(DType::I64, {2}), {3, 4});
  a.set("value", TensorDataPtr(t1));
  b.set("perm", std::vector<int64_t>{1, 0});
  b.set("value", TensorDataPtr(t2));
  CHECK(a == b); // Distinct objects, equal contents.
  t2->setInt(1, 5);
  CHECK(a != b);
  // An int and a float with the same numeric value differ.
  CHECK_FALSE(attrValuesEqual(AttrValue(int64_t(1)), AttrValue(1.0f)));
}

TEST_CASE("tensor data converts between element types") {
  auto data = TensorData::fromDoubles(TensorType(DType::F16, {3}),
                                      {1.5, -2.0, 65504.0});
  CHECK(data->getDouble(0) == 1.5);
  CHECK(data->getDouble(2) == 65504.0);
  CHECK(data->getInt(1) == -2);
  auto ints = TensorData::fromInts(TensorType(DType::I32, {2}), {-7, 9});
  CHECK(ints->getInts() == std::vector<int64_t>{-7, 9});
  CHECK(ints->getBytes().size() == 8);
  auto flags = TensorData::fromInts(TensorType(DType::Bool, {2}), {0, 5});
  CHECK(flags->getInt(1) == 1);
  TensorData zeros(TensorType(DType::F32, {4}));
  CHECK(zeros.getDouble(3) == 0.0);
}
