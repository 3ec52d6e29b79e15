# LLVM 14 from Debian (llvm-14-dev): ADT and Support, linked statically as
# LLVMSupport. We do not use `llvm-config --cxxflags`: it forces -std=c++14
# and -fno-exceptions.
find_package(LLVM 14 REQUIRED CONFIG
  HINTS /usr/lib/llvm-14/lib/cmake/llvm)
message(STATUS "LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")

add_library(remat_llvm INTERFACE)
add_library(remat::llvm ALIAS remat_llvm)
target_include_directories(remat_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
separate_arguments(REMAT_LLVM_DEFS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
target_compile_options(remat_llvm INTERFACE ${REMAT_LLVM_DEFS})
llvm_map_components_to_libnames(REMAT_LLVM_LIBS support)
target_link_libraries(remat_llvm INTERFACE ${REMAT_LLVM_LIBS})

# ONNX 1.12 and Protobuf 3.21 (libonnx-dev, libprotobuf-dev). Protobuf must be
# found before ONNX, whose targets name protobuf::libprotobuf. The headers are
# included as system headers so that -Werror does not apply to them.
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED CONFIG)
add_library(remat_onnx INTERFACE)
add_library(remat::onnx ALIAS remat_onnx)
target_link_libraries(remat_onnx INTERFACE onnx onnx_proto protobuf::libprotobuf)
target_include_directories(remat_onnx SYSTEM INTERFACE ${ONNX_INCLUDE_DIRS}
  ${Protobuf_INCLUDE_DIRS})

# Test tools, needed only to build the tests: doctest (doctest-dev),
# FileCheck and lit from llvm-14-tools, and Python to run lit.
if(REMAT_BUILD_TESTS)
  find_path(DOCTEST_INCLUDE_DIR doctest/doctest.h REQUIRED)
  find_program(REMAT_FILECHECK FileCheck HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
  find_program(REMAT_NOT not HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
  find_file(REMAT_LIT lit.py
    HINTS ${LLVM_TOOLS_BINARY_DIR}/../build/utils/lit /usr/lib/llvm-14/build/utils/lit
    REQUIRED)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
endif()
