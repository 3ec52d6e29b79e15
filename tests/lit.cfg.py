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
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("%not", config.not_tool))
config.substitutions.append(("%python", config.python))
config.environment["PATH"] = os.pathsep.join(
    [config.remat_tools_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", "")])
