# Warnings for remat's own code. An ignored llvm::Error or [[nodiscard]]
# result is always an error; every other warning is one only with
# -DREMAT_WERROR=ON (scripts/test.sh sets it), since users build with their
# own compilers and flags.
function(remat_target_defaults target)
  set(werror)
  if(REMAT_WERROR)
    set(werror -Werror)
  endif()
  # Host C++ only: nvcc compiles a target's .cu files with its own flags.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:
    -Wall -Wextra ${werror} -Werror=unused-result
    -Wno-unused-parameter
    # LLVM 14 headers trip these under GCC 12 and C++20.
    -Wno-deprecated-enum-enum-conversion -Wno-deprecated-copy
    -Wno-redundant-move>)
  # GCC only: clang (the sanitizer build) does not know them. GCC 12's -O3
  # (Release, scripts/gpu-bundle.sh) reports a false -Wrestrict inside
  # libstdc++'s `"literal" + std::string` (GCC bug 105329).
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-class-memaccess -Wno-restrict>)
endfunction()
