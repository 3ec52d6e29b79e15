# -DREMAT_SANITIZE=ON builds everything with ASan and UBSan; UBSan findings
# abort so that tests fail on them.
if(REMAT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# -DREMAT_FUZZ=ON (clang): every library gets libFuzzer's coverage
# instrumentation; the fuzz/ executables link libFuzzer's main.
if(REMAT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "REMAT_FUZZ needs clang (scripts/fuzz.sh uses clang++-14)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
  # clang 14 rejects LLVM 14's JSON.h with libstdc++ 12 in C++20; a copy
  # with json::Array's members moved after json::Value goes first.
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/fuzz/patch_llvm_json.py
      ${LLVM_INCLUDE_DIRS} ${CMAKE_BINARY_DIR}/llvm-json-fix
    RESULT_VARIABLE REMAT_JSON_FIX_RESULT OUTPUT_QUIET)
  if(NOT REMAT_JSON_FIX_RESULT EQUAL 0)
    message(FATAL_ERROR "fuzz/patch_llvm_json.py failed")
  endif()
  include_directories(BEFORE ${CMAKE_BINARY_DIR}/llvm-json-fix)
endif()
