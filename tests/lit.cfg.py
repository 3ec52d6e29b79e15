# lit configuration for remat's golden (.rir) and tool (.test) tests.
import os
import lit.formats

config.name = "remat"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".rir", ".test"]
config.excludes = ["CMakeLists.txt", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.remat_obj_root, "tests")

config.substitutions.append(("%remat-opt", os.path.join(config.remat_tools_dir, "remat-opt")))
config.substitutions.append(("%remat-run", os.path.join(config.remat_tools_dir, "remat-run")))
config.substitutions.append(("%remat-sweep", os.path.join(config.remat_tools_dir, "remat-sweep")))
# The benchmarks of tools/bench (their arguments are tested, never their times).
config.substitutions.append(("%remat-bench-gemm", os.path.join(config.remat_tools_dir, "remat-bench-gemm")))
config.substitutions.append(("%remat-bench-cores", os.path.join(config.remat_tools_dir, "remat-bench-cores")))
config.substitutions.append(("%remat-bench-parallel", os.path.join(config.remat_tools_dir, "remat-bench-parallel")))
config.substitutions.append(("%remat-bench-register-shapes", os.path.join(config.remat_tools_dir, "remat-bench-register-shapes")))
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("%not", config.not_tool))
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%test-python", config.test_python))
# The example pass plugins of examples/plugin (remat-opt --load-pass-plugin).
config.substitutions.append(("%plugin-dir", os.path.join(config.remat_obj_root, "examples", "plugin")))

# Sanitizers multiply memory use: checks of the process's RSS declare
# `UNSUPPORTED: sanitize`.
if getattr(config, "remat_sanitize", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("sanitize")

# Tests of the CUDA backend declare `REQUIRES: cuda-backend`: built when nvcc
# was found (REMAT_CUDA), with or without a GPU.
if getattr(config, "remat_have_cuda", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("cuda-backend")
# Tests of the benchmarks' arguments (tools/bench) declare
# `REQUIRES: benchmarks`: built with -DREMAT_BUILD_BENCHMARKS=ON.
if getattr(config, "remat_build_benchmarks", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("benchmarks")
# A machine with an NVIDIA driver and device nodes: the GPU tests run there.
if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0"):
    config.available_features.add("cuda-device")

# What runs remat's own AVX-512 kernel (runtime/cpu/PackedSgemm.cpp):
# checks of its figures declare `REQUIRES: avx512f`.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        if " avx512f" in cpuinfo.read():
            config.available_features.add("avx512f")
except OSError:
    pass

# Reference checks that need the onnx Python package (scripts/setup.sh puts
# it in .venv) declare `REQUIRES: onnx` (the oracle's, `REQUIRES: highspy`);
# without it lit reports them UNSUPPORTED, visibly, instead of passing.
# With REMAT_REQUIRE_REFERENCE=1 (scripts/test.sh and so CI set it) a
# missing package is an error rather than silent UNSUPPORTED results inside
# ctest's one `lit` entry: the reference toolchain is always installable.
import subprocess
require_reference = os.environ.get("REMAT_REQUIRE_REFERENCE", "0") == "1"
for package in ["onnx", "onnxruntime", "highspy"]:
    if subprocess.run([config.test_python, "-c", "import " + package],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
        config.available_features.add(package)
    elif require_reference:
        lit_config.fatal("the %s Python package is missing for %s and REMAT_REQUIRE_REFERENCE=1: "
                         "run scripts/setup.sh (or set REMAT_REQUIRE_REFERENCE=0 to skip the "
                         "reference checks)" % (package, config.test_python))
    else:
        lit_config.note("the %s Python package is missing: tests that need it are unsupported" % package)
config.environment["PATH"] = os.pathsep.join(
    [config.remat_tools_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", "")])
# remat's CPU runtime runs OpenBLAS on one thread of its own (runtime/cpu/
# Linalg.cpp); OpenBLAS's thread pool, started when the library loads, only
# spins in sched_yield for the life of a short tool run. One thread here
# starts none, so the tests do not compete with it for the cores.
config.environment["OPENBLAS_NUM_THREADS"] = "1"
