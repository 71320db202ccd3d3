# Helpers shared by every module's CMakeLists.txt.

# Warnings (as errors when ADAPTERD_WERROR) for adapterd's own targets only;
# third-party headers are included as SYSTEM so they do not trip them.
function(adapterd_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
    -Wno-unused-parameter -Wno-missing-field-initializers -Wnon-virtual-dtor -Wimplicit-fallthrough)
  if(ADAPTERD_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# adapterd_library(NAME <module> SRCS ... DEPS ...)
# Defines adapterd_<module> with alias adapterd::<module>. Public include root
# is the repository root, so headers are included as "server/model/foo.h".
function(adapterd_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(adapterd_${ARG_NAME} ${ARG_SRCS})
  add_library(adapterd::${ARG_NAME} ALIAS adapterd_${ARG_NAME})
  target_include_directories(adapterd_${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(adapterd_${ARG_NAME} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  adapterd_set_warnings(adapterd_${ARG_NAME})
endfunction()

# adapterd_test(NAME <name> SRCS ... DEPS ... [LABELS ...])
# One GoogleTest binary registered with ctest (one ctest entry per binary keeps
# start-up of LibTorch-linked binaries to once per file).
function(adapterd_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  adapterd_set_warnings(${ARG_NAME})
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # Two OpenMP threads exercise LibTorch's parallel kernels; one under
  # ThreadSanitizer, which cannot see libgomp's barriers (scripts/sanitize.sh).
  if(ADAPTERD_SANITIZE STREQUAL "thread")
    set(omp_threads 1)
  else()
    set(omp_threads 2)
  endif()
  set_tests_properties(${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "ADAPTERD_SOURCE_DIR=${PROJECT_SOURCE_DIR};ADAPTERD_BINARY_DIR=${PROJECT_BINARY_DIR};OMP_NUM_THREADS=${omp_threads}")
  if(ARG_LABELS)
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
