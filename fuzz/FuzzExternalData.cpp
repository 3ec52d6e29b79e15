//===- fuzz/FuzzExternalData.cpp - External data, links and locations -----===//
//
// Builds, once, a temporary folder holding a model's folder with data files
// and symbolic links (to files and folders inside it, outside it, absolute,
// dangling, a loop) beside a folder of secrets, then imports a model whose
// tensors' external-data locations, offsets and lengths come from the fuzz
// input. Invariant: a model that imports read nothing outside its folder;
// every location it kept resolves (libc realpath, independently of the
// importer) inside the folder, and no weight holds a byte of the secrets.
//
// Input: up to 4 lines, one tensor each: byte 0 picks the element count
// (bits 0-2: 2-9 floats), the offset (bits 3-4: 0-3 elements in, given when
// bit 5 is set) and whether the length is left out (bit 6); the rest of the
// line is the location.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"

#include "frontends/onnx/OnnxImporter.h"
#include "passes/FoldingPolicy.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ftw.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace remat;

namespace {

/// Every byte of a file outside the model's folder; no file inside holds it.
constexpr unsigned char kSecretByte = 0xA5;

/// The fixture's folder, and the model's folder in it, resolved.
std::string fixtureRoot, modelFolder;

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return remove(path);
}

/// Removes the fixture at exit; FTW_PHYS: links are removed, not followed.
void removeFixture() {
  nftw(fixtureRoot.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
}

void writeFile(const std::string &path, const std::string &bytes) {
  FILE *file = std::fopen(path.c_str(), "wb");
  fuzz::fuzzCheck(file != nullptr, "cannot create a file of the fixture");
  fuzz::fuzzCheck(std::fwrite(bytes.data(), 1, bytes.size(), file) ==
                      bytes.size(),
                  "cannot write a file of the fixture");
  std::fclose(file);
}

void makeFolder(const std::string &path) {
  fuzz::fuzzCheck(mkdir(path.c_str(), 0700) == 0,
                  "cannot create a folder of the fixture");
}

void makeLink(const std::string &target, const std::string &path) {
  fuzz::fuzzCheck(symlink(target.c_str(), path.c_str()) == 0,
                  "cannot create a link of the fixture");
}

/// ROOT/model (the model's folder) and ROOT/outside (the secrets).
void buildFixture() {
  char rootTemplate[] = "/tmp/remat-fuzz-external-XXXXXX";
  fuzz::fuzzCheck(mkdtemp(rootTemplate) != nullptr,
                  "cannot create the fixture's folder");
  std::string root = rootTemplate;
  fixtureRoot = root;
  std::atexit(removeFixture);
  std::string model = root + "/model", outside = root + "/outside";
  makeFolder(model);
  makeFolder(outside);
  makeFolder(model + "/sub");
  // Data inside: bytes 0x00-0x3f, never the secret byte.
  std::string data;
  for (int i = 0; i < 256; ++i)
    data += static_cast<char>(i % 64);
  writeFile(model + "/a.bin", data);
  writeFile(model + "/sub/b.bin", data.substr(0, 100));
  writeFile(outside + "/secret.bin", std::string(256, kSecretByte));
  makeLink("a.bin", model + "/in.bin");                  // inside
  makeLink("../a.bin", model + "/sub/up.bin");           // inside, via ..
  makeLink("..", model + "/sub/up");                     // the folder itself
  makeLink("sub", model + "/subdir");                    // a folder inside
  makeLink("../outside/secret.bin", model + "/out.bin"); // outside
  makeLink("../outside", model + "/outdir");             // a folder outside
  makeLink(outside + "/secret.bin", model + "/abs.bin"); // absolute, outside
  makeLink(outside, model + "/sub/absdir");              // absolute folder
  makeLink("/", model + "/rootdir");                     // the root
  makeLink("missing.bin", model + "/dangling.bin");
  makeLink("loop.bin", model + "/loop.bin");
  makeLink("../model", outside + "/back"); // outside, pointing back in
  char resolved[PATH_MAX];
  fuzz::fuzzCheck(realpath(model.c_str(), resolved) != nullptr,
                  "cannot resolve the fixture's folder");
  modelFolder = resolved;
}

onnx_frontend::ImportOptions importOptions() {
  onnx_frontend::ImportOptions options;
  options.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  return options;
}

/// Whether \p location, relative to the model's folder, resolves inside it.
bool resolvesInside(const std::string &location) {
  std::string path = modelFolder + "/" + location;
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved))
    return false;
  llvm::StringRef result(resolved);
  return result.startswith(modelFolder + "/");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  buildFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  llvm::SmallVector<llvm::StringRef, 4> lines;
  input.split(lines, '\n', /*MaxSplit=*/3);

  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("fuzz");
  std::vector<std::string> locations;
  for (size_t i = 0; i < lines.size(); ++i) {
    llvm::StringRef line = lines[i];
    if (line.empty())
      continue;
    auto shape = static_cast<unsigned char>(line.front());
    std::string location = line.drop_front().str();
    int64_t elements = 2 + shape % 8;
    int64_t offset = 4 * ((shape >> 3) % 4);
    std::string name = "w" + std::to_string(i);
    onnx::TensorProto *tensor = graph->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->add_dims(elements);
    tensor->set_data_location(onnx::TensorProto::EXTERNAL);
    auto entry = [&](const char *key, const std::string &value) {
      onnx::StringStringEntryProto *e = tensor->add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    entry("location", location);
    if (shape & 0x20)
      entry("offset", std::to_string(offset));
    if (!(shape & 0x40))
      entry("length", std::to_string(4 * elements));
    // Each weight is an output so that it stays in the graph.
    onnx::NodeProto *node = graph->add_node();
    node->set_op_type("Identity");
    node->add_input(name);
    node->add_output(name + "_out");
    onnx::ValueInfoProto *output = graph->add_output();
    output->set_name(name + "_out");
    onnx::TypeProto::Tensor *type =
        output->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    type->mutable_shape()->add_dim()->set_dim_value(elements);
    locations.push_back(location);
  }
  std::string bytes;
  fuzz::fuzzCheck(model.SerializeToString(&bytes), "a model does not serialize");

  // The model as a file of its folder would be read, through the folder
  // given explicitly (remat.load(..., base_dir=)).
  auto imported = onnx_frontend::importOnnxBytes(bytes, "fuzz.onnx",
                                                 modelFolder, importOptions());
  if (!imported) {
    llvm::consumeError(imported.takeError());
    return 0;
  }
  for (const std::string &location : locations)
    fuzz::fuzzCheck(resolvesInside(location),
                    "a location outside the model's folder was read");
  for (const ir::Value *input : (*imported)->getInputs()) {
    if (!input->getData())
      continue;
    for (uint8_t byte : input->getData()->getBytes())
      fuzz::fuzzCheck(byte != kSecretByte,
                      "a weight holds bytes from outside the model's folder");
  }
  // Without a folder, no external data is read at all.
  auto withoutFolder = onnx_frontend::importOnnxBytes(bytes, "fuzz.onnx", "",
                                                      importOptions());
  if (withoutFolder)
    fuzz::fuzzCheck(locations.empty(),
                    "external data was read with no base folder");
  else
    llvm::consumeError(withoutFolder.takeError());
  return 0;
}
