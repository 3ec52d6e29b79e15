/* A C program that uses remat through pkg-config (tests/install/run.sh
 * builds and runs it; README "Use remat in your pipeline" shows it).
 *   consumer MODEL BIND BUDGET OUT.onnx */
#include <remat-c/remat.h>

#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s MODEL BIND BUDGET OUT.onnx\n", argv[0]);
    return 2;
  }
  RematModel *model = NULL;
  RematStatus *status = rematModelLoad(argv[1], argv[2], &model);
  if (!status)
    status = rematModelOptimize(model, argv[3], "auto");
  if (!status)
    status = rematModelWriteOnnx(model, argv[4]);
  RematBuffer *plan = NULL;
  if (!status)
    status = rematModelGetPlan(model, &plan);
  if (status) {
    fprintf(stderr, "error: %s\n", rematStatusGetMessage(status));
    rematStatusDestroy(status);
    rematModelDestroy(model);
    return 1;
  }
  printf("remat %s: %s\n", rematGetVersion(), rematBufferGetData(plan));
  rematBufferDestroy(plan);
  rematModelDestroy(model);
  return 0;
}
