# Precompiled MLIR headers for the compiler's largest libraries. Each of their
# sources otherwise parses MLIR's IR headers and dsc's three dialects anew:
# 6-15 s of a 2-core build per source, most of it parsing. One precompiled
# header per library (each has its own flags: -fexceptions, -fPIC) costs
# about 30 s and saves 4-8 s on each source. docs/fuzzing.md, "CI", has the
# measured build times.
option(DSC_PRECOMPILED_HEADERS "Precompile cmake/MlirPch.h for the compiler's larger libraries" ON)

function(dsc_precompile_mlir target)
  if(DSC_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/MlirPch.h)
  endif()
endfunction()
