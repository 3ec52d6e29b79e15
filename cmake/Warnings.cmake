# Warnings are errors for remat's own code; an ignored llvm::Error or
# [[nodiscard]] result is always an error.
function(remat_target_defaults target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Werror -Werror=unused-result
    -Wno-unused-parameter
    # LLVM 14 headers trip these under GCC 12 and C++20.
    -Wno-deprecated-enum-enum-conversion -Wno-deprecated-copy
    -Wno-redundant-move -Wno-class-memaccess)
endfunction()
