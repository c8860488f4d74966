# Helper functions for the Active RDMA build. Every target of the project goes through one of them,
# so warnings, include paths and test discovery are set in one place.
#
#   ardma_cc_library(NAME SRCS... [HDRS...] [DEPS...])        -> static library libardma_NAME.a
#                                                                + alias ardma::NAME
#   ardma_cc_binary(NAME [INSTALL] SRCS... [DEPS...])         -> executable (INSTALL: even where
#                                                                ARDMA_NO_INSTALL is set)
#   ardma_cc_test(NAME SRCS... [DEPS...])                     -> gtest executable discovered by ctest
#   ardma_cc_benchmark(NAME SRCS... [DEPS...])                -> Google Benchmark executable
#   ardma_active_library(NAME ID id SRCS... [DEPS...] [LIBRARY_DEPS...])
#       An active-code library: the same sources are built twice,
#         NAME_module  a MODULE shared object (the bytes shipped to the server by LOAD), and
#         NAME         a static library holding the function table (for Mode::kRdma, which runs the
#                      functions on the client) and the module's bytes, reachable through
#                      ARDMA_DECLARE_ACTIVE_LIBRARY(id) / ardma::active_libraries::id().
#       LIBRARY_DEPS names other active libraries (by target) whose functions this one Calls.

include(GNUInstallDirs)

# Installed headers live under include/ardma, with the tree's paths ("core/client/client.h").
set(ARDMA_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/ardma)

function(_ardma_common_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
                         -Wno-missing-field-initializers $<$<BOOL:${ARDMA_WERROR}>:-Werror>)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                              $<INSTALL_INTERFACE:${ARDMA_INSTALL_INCLUDEDIR}>)
endfunction()

# Installs a library into the exported package (find_package(ardma)), unless its directory set
# ARDMA_NO_INSTALL (tests' and benchmarks' helpers).
function(_ardma_install_library target)
  if(ARDMA_NO_INSTALL)
    return()
  endif()
  install(TARGETS ${target} EXPORT ardmaTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY ARDMA_INSTALLED_LIBRARIES ${target})
endfunction()

function(ardma_cc_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;HDRS;DEPS" ${ARGN})
  if(ARG_SRCS)
    add_library(${name} STATIC ${ARG_SRCS} ${ARG_HDRS})
    _ardma_common_options(${name})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
    # The package carries C++20 to its users as a usage requirement.
    target_compile_features(${name} PUBLIC cxx_std_20)
    if(NOT name MATCHES "^ardma_")  # libardma_base.a, not a libbase.a that would clash
      set_target_properties(${name} PROPERTIES OUTPUT_NAME ardma_${name})
    endif()
  else()
    add_library(${name} INTERFACE ${ARG_HDRS})
    target_include_directories(${name} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                 $<INSTALL_INTERFACE:${ARDMA_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
    target_compile_features(${name} INTERFACE cxx_std_20)
  endif()
  add_library(ardma::${name} ALIAS ${name})
  _ardma_install_library(${name})
endfunction()

function(ardma_cc_binary name)
  cmake_parse_arguments(ARG "INSTALL" "OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  _ardma_common_options(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  if(ARG_OUTPUT_NAME)
    set_target_properties(${name} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT_NAME})
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  if(NOT ARDMA_NO_INSTALL OR ARG_INSTALL)
    install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endfunction()

# TRANSPORTS runs the suite once more per transport named, with its clients on that transport
# (core/testing/test_server.h: TestTransport):
#   unix     the server's Unix-domain socket, tests named unix.*
#   ucx      UCX over shared memory (UCX_TLS=shm,self): the one-sided path, tests named ucx.*
#   ucx_tcp  UCX over its TCP transport (UCX_TLS=tcp,self), tests named ucx_tcp.*
#   cluster  tcp; suites on ServiceFixture run over a 3-server cluster with a real etcd
#            (core/testing/service_fixture.h), tests named cluster.*
# (the test sets UCX_TLS itself from $ARDMA_TEST_TRANSPORT; the binaries it runs inherit it).
function(ardma_cc_test name)
  if(NOT ARDMA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;TRANSPORTS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  _ardma_common_options(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120
                       ENVIRONMENT "ARDMA_BIN_DIR=${PROJECT_BINARY_DIR}/bin")
  foreach(transport IN LISTS ARG_TRANSPORTS)
    if(NOT transport MATCHES "^(unix|ucx|ucx_tcp|cluster)$")
      message(FATAL_ERROR "ardma_cc_test(${name}): unknown transport ${transport}")
    endif()
    # (A second variable goes in ENVIRONMENT_MODIFICATION: a list in ENVIRONMENT would be split
    # into properties.)
    gtest_discover_tests(${name} TEST_PREFIX "${transport}." DISCOVERY_TIMEOUT 60
                         PROPERTIES TIMEOUT 120
                         ENVIRONMENT "ARDMA_BIN_DIR=${PROJECT_BINARY_DIR}/bin"
                         ENVIRONMENT_MODIFICATION "ARDMA_TEST_TRANSPORT=set:${transport}")
  endforeach()
endfunction()

function(ardma_cc_benchmark name)
  if(NOT ARDMA_BUILD_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  _ardma_common_options(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

# ardma_active_library() itself is in ArdmaActiveLibrary.cmake, shared with the installed package;
# inside this tree each one also gets the project's warnings and is installed.
function(_ardma_active_library_hook name id)
  _ardma_common_options(${name}_module)
  _ardma_common_options(${name})
  _ardma_install_library(${name})
  if(NOT ARDMA_NO_INSTALL)
    # The shipped object too, for `ardmad --preload` from the server's own disk.
    install(FILES ${ARDMA_ACTIVE_OUTPUT_DIR}/ardma_${id}.so
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/ardma/active COMPONENT runtime)
  endif()
endfunction()
set(ARDMA_ACTIVE_OUTPUT_DIR ${PROJECT_BINARY_DIR}/active)
include(${CMAKE_CURRENT_LIST_DIR}/ArdmaActiveLibrary.cmake)
