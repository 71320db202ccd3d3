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

# --- Which build runs which test ------------------------------------------------
# scripts/test.sh runs every test once: the ones whose subject is adapterd's
# C++ under ASan + UBSan (build-asan/), and the rest, labelled release_build,
# against the release build (build/): source checks (format, clang-tidy,
# layering, thread safety, the linters), YAML/JSON checks, the container image
# (it runs the release binaries), glibc's allocator tuning (which ASan
# replaces) and the benchmarks' smoke test (ASan builds no benchmarks). The
# label is the one list: scripts/sanitize.sh address runs `-LE release_build`,
# test.sh runs `-L release_build` in build/. The `release_build` target
# (adapterd_add_release_build_target) builds everything but the GoogleTest
# executables the ASan run owns, so that CI compiles each test once.
set(ADAPTERD_RELEASE_BUILD_LABEL release_build)
set(ADAPTERD_TESTS_DIR "${PROJECT_SOURCE_DIR}/tests")

# adapterd_test(NAME <name> SRCS ... DEPS ... [LABELS ...] [TIMEOUT s] [COST s])
# One GoogleTest binary registered with ctest (one ctest entry per binary keeps
# start-up of LibTorch-linked binaries to once per file). COST: the test's
# usual seconds, for the long ones: ctest -j starts the costliest tests first
# when it has no timings of its own yet (a fresh build tree, as in CI), so a
# minutes-long test does not start last and run alone on one core. LABELS
# with release_build: the test runs against the release build only (above).
function(adapterd_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT;COST" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  if(ADAPTERD_RELEASE_BUILD_LABEL IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY ADAPTERD_RELEASE_BUILD_TEST_TARGETS ${ARG_NAME})
  endif()
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
  # ADAPTERD_DTYPE_CALIBRATION=false: every adapterd a test starts serves
  # the dtype the CPU's flags decide, unmeasured, so that a test comparing
  # two starts' scores bit for bit never sees the timing-based choice of
  # --dtype auto flip between them (tests/api/dtype_test.cc tests it).
  set_tests_properties(${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "ADAPTERD_SOURCE_DIR=${PROJECT_SOURCE_DIR};ADAPTERD_BINARY_DIR=${PROJECT_BINARY_DIR};OMP_NUM_THREADS=${omp_threads};ADAPTERD_DTYPE_CALIBRATION=false")
  if(ARG_LABELS)
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  if(ARG_COST)
    set_tests_properties(${ARG_NAME} PROPERTIES COST ${ARG_COST})
  endif()
endfunction()

# adapterd_python_test(NAME <module> [DIR dir] [TIMEOUT s] [COST s] [DEBIAN_PYTHON]
#                      [RELEASE_BUILD] [PROGRAMS target ...] [ENVIRONMENT k=v ...]):
# the Python unittest module <module>.py in DIR (default: the current source
# directory), run with the interpreter find_package(Python3) found, labelled
# unit; with DEBIAN_PYTHON, with Debian's /usr/bin/python3 instead, for tests
# that import Debian's python3-* packages (another interpreter on PATH, a
# pyenv or a venv, does not see them). ADAPTERD_SOURCE_DIR and
# PYTHONDONTWRITEBYTECODE (and ADAPTERD_DTYPE_CALIBRATION=false) are set for
# every one; ENVIRONMENT adds to them.
# TIMEOUT defaults to 60 s; COST as in adapterd_test. RELEASE_BUILD adds the
# release_build label (above: it runs against the release build only). PROGRAMS: the targets
# the test runs; a target of the test's own name depends on them, as a
# GoogleTest binary's target does, so that scripts/sanitize.sh (which builds
# each selected test's target) builds them.
function(adapterd_python_test)
  cmake_parse_arguments(ARG "DEBIAN_PYTHON;RELEASE_BUILD" "NAME;DIR;TIMEOUT;COST" "ENVIRONMENT;PROGRAMS" ${ARGN})
  if(ARG_PROGRAMS)
    add_custom_target(${ARG_NAME})
    add_dependencies(${ARG_NAME} ${ARG_PROGRAMS})
  endif()
  if(NOT ARG_DIR)
    set(ARG_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 60)
  endif()
  # ADAPTERD_DTYPE_CALIBRATION=false as in adapterd_test.
  set(env "ADAPTERD_SOURCE_DIR=${PROJECT_SOURCE_DIR}" "PYTHONDONTWRITEBYTECODE=1" "ADAPTERD_DTYPE_CALIBRATION=false"
      ${ARG_ENVIRONMENT})
  set(interpreter Python3::Interpreter)
  if(ARG_DEBIAN_PYTHON)
    set(interpreter /usr/bin/python3)
  endif()
  add_test(NAME ${ARG_NAME} COMMAND ${interpreter} -m unittest -v ${ARG_NAME} WORKING_DIRECTORY ${ARG_DIR})
  set(labels unit)
  if(ARG_RELEASE_BUILD)
    list(APPEND labels ${ADAPTERD_RELEASE_BUILD_LABEL})
  endif()
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${env}")
  if(ARG_COST)
    set_tests_properties(${ARG_NAME} PROPERTIES COST ${ARG_COST})
  endif()
endfunction()

# --- Precompiled headers ------------------------------------------------------
# LibTorch's headers are most of a LibTorch translation unit's compile time
# (<ATen/ATen.h> alone preprocesses to hundreds of thousands of lines; the
# figures: docs/ARCHITECTURE.md, "What CI's time goes to").
# adapterd_apply_precompiled_headers() sorts every source file into
# one of three headers, each built once per build tree:
#   adapterd_torch_pch       LibTorch, for the files that include a LibTorch
#                            header, directly or through the project's own
#                            headers, outside tests/;
#   adapterd_test_torch_pch  LibTorch, GoogleTest and GoogleMock, for such
#                            files in tests/;
#   adapterd_test_pch        GoogleTest, GoogleMock, gRPC, the project's
#                            protos, nlohmann-json and Abseil, for the test
#                            targets with no LibTorch file.
# The tests' two are built at the tests' level (ADAPTERD_TEST_OPTIMIZATION):
# GCC refuses a header built at another (__OPTIMIZE__ differs). Other files,
# and the non-LibTorch files of a target that has LibTorch ones, compile as
# before; library files without LibTorch gain too little from a shared
# header to pay for loading one that large. Which files include
# LibTorch is read from the sources at configure time, so a new file needs no
# list to be kept. Consumers compile with -Winvalid-pch: a header GCC cannot
# use is a warning (an error under ADAPTERD_WERROR), never a silent slowdown.

# _adapterd_includes_torch(<absolute path> <out var>): TRUE when the file, or
# a project header it includes (by its path from the repository root),
# includes <ATen/...>, <c10/...> or <torch/...>. Memoised per file.
function(_adapterd_includes_torch file out)
  get_property(known GLOBAL PROPERTY "ADAPTERD_TORCH_INCLUDE:${file}" SET)
  if(known)
    get_property(result GLOBAL PROPERTY "ADAPTERD_TORCH_INCLUDE:${file}")
    set(${out} ${result} PARENT_SCOPE)
    return()
  endif()
  # Marked FALSE first, so an include cycle ends.
  set_property(GLOBAL PROPERTY "ADAPTERD_TORCH_INCLUDE:${file}" FALSE)
  set(result FALSE)
  if(EXISTS "${file}")
    file(STRINGS "${file}" includes REGEX "^#include [<\"]")
    foreach(line IN LISTS includes)
      if(line MATCHES "^#include <(ATen|c10|torch)/")
        set(result TRUE)
        break()
      elseif(line MATCHES "^#include \"([^\"]+)\"")
        _adapterd_includes_torch("${PROJECT_SOURCE_DIR}/${CMAKE_MATCH_1}" nested)
        if(nested)
          set(result TRUE)
          break()
        endif()
      endif()
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY "ADAPTERD_TORCH_INCLUDE:${file}" ${result})
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# _adapterd_pch_for_dir(<dir>): gives the targets defined in <dir> and below
# their precompiled header.
function(_adapterd_pch_for_dir dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$"
       OR target MATCHES "^adapterd_(test_)?(torch_)?pch$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(torch_sources "")
    set(other_sources "")
    foreach(source IN LISTS sources)
      if(NOT source MATCHES "\\.cc$")
        continue()
      endif()
      cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY "${source_dir}" OUTPUT_VARIABLE path)
      _adapterd_includes_torch("${path}" uses_torch)
      if(uses_torch)
        list(APPEND torch_sources "${path}")
      else()
        list(APPEND other_sources "${path}")
      endif()
    endforeach()
    cmake_path(IS_PREFIX ADAPTERD_TESTS_DIR "${source_dir}" NORMALIZE in_tests)
    set(header "")
    if(torch_sources)
      set(header adapterd_torch_pch)
      if(in_tests)
        set(header adapterd_test_torch_pch)
      endif()
    elseif(in_tests AND other_sources AND TARGET adapterd_test_pch)
      set(header adapterd_test_pch)
    endif()
    if(header)
      target_precompile_headers(${target} REUSE_FROM ${header})
      # -pthread as the headers were built with: it defines _REENTRANT, and
      # GCC refuses a header built with other macro definitions.
      target_compile_options(${target} PRIVATE -Winvalid-pch -pthread)
      if(torch_sources AND other_sources)
        set_source_files_properties(${other_sources} TARGET_DIRECTORY ${target}
          PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _adapterd_pch_for_dir("${subdir}")
  endforeach()
endfunction()

# _adapterd_pch_target(<name> <comment> HEADERS ... LIBS ... [OPTIONS ...]):
# an object library whose one empty file builds the precompiled <HEADERS>
# with the usage requirements of <LIBS> and the compile <OPTIONS>.
function(_adapterd_pch_target name comment)
  cmake_parse_arguments(ARG "" "" "HEADERS;LIBS;OPTIONS" ${ARGN})
  set(stub "${PROJECT_BINARY_DIR}/${name}.cc")
  file(CONFIGURE OUTPUT "${stub}" CONTENT "// The translation unit that builds ${comment}.\n")
  add_library(${name} OBJECT "${stub}")
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
  adapterd_set_warnings(${name})
  target_compile_options(${name} PRIVATE -pthread ${ARG_OPTIONS})
  target_precompile_headers(${name} PRIVATE ${ARG_HEADERS})
endfunction()

# adapterd_apply_precompiled_headers(): call once, at the end of the
# top-level CMakeLists.txt, after every target exists. GCC only: clang 14
# cannot precompile ATen's headers (std::vector<c10::IValue> used while
# IValue is incomplete, with or without -fpch-instantiate-templates), so the
# fuzz build (clang) compiles as before.
function(adapterd_apply_precompiled_headers)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  set(torch_headers <ATen/ATen.h> <ATen/Parallel.h> <c10/core/InferenceMode.h>)
  _adapterd_pch_target(adapterd_torch_pch "LibTorch's precompiled header"
    HEADERS ${torch_headers} LIBS ${TORCH_LIBRARIES})
  if(ADAPTERD_BUILD_TESTS)
    set(gtest_headers <gtest/gtest.h> <gmock/gmock.h>)
    _adapterd_pch_target(adapterd_test_torch_pch "the LibTorch tests' precompiled header"
      HEADERS ${torch_headers} ${gtest_headers}
      LIBS ${TORCH_LIBRARIES} GTest::gtest GTest::gmock
      OPTIONS ${ADAPTERD_TEST_OPTIMIZATION})
    if(NOT ADAPTERD_MODEL_ONLY)
      _adapterd_pch_target(adapterd_test_pch "the other tests' precompiled header"
        HEADERS ${gtest_headers} <grpcpp/grpcpp.h>
          [["proto/adapterd/v1/adapterd_service.grpc.pb.h"]] [["proto/adapterd/storage/v1/records.pb.h"]]
          <nlohmann/json.hpp> [["absl/status/status.h"]] [["absl/status/statusor.h"]]
          [["absl/strings/str_cat.h"]] [["absl/strings/str_split.h"]] [["absl/synchronization/mutex.h"]]
          [["absl/time/clock.h"]] [["absl/time/time.h"]]
          <filesystem> <fstream> <map> <memory> <set> <sstream> <string> <thread> <vector>
        LIBS GTest::gtest GTest::gmock adapterd::proto_grpc adapterd::storage_proto nlohmann_json::nlohmann_json
          absl::status absl::statusor absl::strings absl::synchronization absl::time
        OPTIONS ${ADAPTERD_TEST_OPTIMIZATION})
    endif()
  endif()
  _adapterd_pch_for_dir("${PROJECT_SOURCE_DIR}")
endfunction()

# _adapterd_targets_below(<dir> <out>): every target defined in <dir> and its
# subdirectories.
function(_adapterd_targets_below dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _adapterd_targets_below("${subdir}" below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# adapterd_add_release_build_target(): call once, at the end of the top-level
# CMakeLists.txt. Defines `release_build`: every target `all` builds outside
# tests/ (the product, benchmarks and tools, and the test helpers under
# common/testing/), plus the GoogleTest executables labelled release_build.
# Left out: the rest of tests/ (the ASan + UBSan build compiles and runs those
# tests, their helpers and the tests' precompiled headers).
function(adapterd_add_release_build_target)
  _adapterd_targets_below("${PROJECT_SOURCE_DIR}" targets)
  get_property(release_tests GLOBAL PROPERTY ADAPTERD_RELEASE_BUILD_TEST_TARGETS)
  add_custom_target(release_build)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(excluded ${target} EXCLUDE_FROM_ALL)
    get_target_property(source_dir ${target} SOURCE_DIR)
    cmake_path(IS_PREFIX ADAPTERD_TESTS_DIR "${source_dir}" NORMALIZE in_tests)
    if(type STREQUAL "INTERFACE_LIBRARY" OR excluded OR target STREQUAL "release_build"
       OR target MATCHES "^adapterd_test_(torch_)?pch$"
       OR (in_tests AND NOT target IN_LIST release_tests))
      continue()
    endif()
    add_dependencies(release_build ${target})
  endforeach()
endfunction()
