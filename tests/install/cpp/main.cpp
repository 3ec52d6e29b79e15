// A program that uses remat through its installed CMake package
// (tests/install/run.sh builds and runs it; README "Use remat in your
// pipeline" shows it).
//   consumer MODEL BIND BUDGET OUT.onnx
#include <remat/remat.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL BIND BUDGET OUT.onnx\n", argv[0]);
    return 2;
  }
  remat::Result<remat::Model> model = remat::Model::load(argv[1], {argv[2]});
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  remat::OptimizeOptions options;
  options.budget = argv[3];
  options.strategy = "auto";
  if (remat::Status status = model->optimize(options); !status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  if (remat::Status status = model->writeOnnx(argv[4]); !status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  std::printf("remat %s: %s\n", remat::getVersion(),
              model->getMemoryReportJson().c_str());
  return 0;
}
