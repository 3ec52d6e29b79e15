# -DREMAT_SANITIZE=ON builds everything with ASan and UBSan; UBSan findings
# abort so that tests fail on them.
if(REMAT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
