# Helper functions for the Active RDMA build. Every target of the project goes through one of them,
# so warnings, include paths and test discovery are set in one place.
#
#   ardma_cc_library(NAME SRCS... [HDRS...] [DEPS...])        -> static library libardma_NAME.a
#                                                                + alias ardma::NAME
#   ardma_cc_binary(NAME SRCS... [DEPS...])                   -> executable
#   ardma_cc_test(NAME SRCS... [DEPS...])                     -> gtest executable discovered by ctest
#   ardma_cc_benchmark(NAME SRCS... [DEPS...])                -> Google Benchmark executable
#   ardma_active_library(NAME ID id SRCS... [DEPS...] [LIBRARY_DEPS...])
#       An active-code library: the same sources are built twice,
#         NAME_module  a MODULE shared object (the bytes shipped to the server by LOAD), and
#         NAME         a static library holding the function table (for Mode::kRdma, which runs the
#                      functions on the client) and the module's bytes, reachable through
#                      ARDMA_DECLARE_ACTIVE_LIBRARY(id) / ardma::active_libraries::id().
#       LIBRARY_DEPS names other active libraries (by target) whose functions this one Calls.

function(_ardma_common_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
                         -Wno-missing-field-initializers)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

function(ardma_cc_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;HDRS;DEPS" ${ARGN})
  if(ARG_SRCS)
    add_library(${name} STATIC ${ARG_SRCS} ${ARG_HDRS})
    _ardma_common_options(${name})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
    if(NOT name MATCHES "^ardma_")  # libardma_base.a, not a libbase.a that would clash
      set_target_properties(${name} PROPERTIES OUTPUT_NAME ardma_${name})
    endif()
  else()
    add_library(${name} INTERFACE ${ARG_HDRS})
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
  add_library(ardma::${name} ALIAS ${name})
endfunction()

function(ardma_cc_binary name)
  cmake_parse_arguments(ARG "" "OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  _ardma_common_options(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  if(ARG_OUTPUT_NAME)
    set_target_properties(${name} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT_NAME})
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

# TRANSPORTS runs the suite once more per transport named, with its clients on that transport
# (core/testing/test_server.h: TestTransport):
#   unix     the server's Unix-domain socket, tests named unix.*
#   ucx      UCX over shared memory (UCX_TLS=shm,self): the one-sided path, tests named ucx.*
#   ucx_tcp  UCX over its TCP transport (UCX_TLS=tcp,self), tests named ucx_tcp.*
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
    if(NOT transport MATCHES "^(unix|ucx|ucx_tcp)$")
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

function(ardma_active_library name)
  cmake_parse_arguments(ARG "" "ID" "SRCS;DEPS;LIBRARY_DEPS" ${ARGN})
  if(NOT ARG_ID)
    message(FATAL_ERROR "ardma_active_library(${name}): ID is required")
  endif()

  # The shipped shared object. Only its entry point is exported.
  add_library(${name}_module MODULE ${ARG_SRCS})
  _ardma_common_options(${name}_module)
  target_compile_definitions(${name}_module PRIVATE ARDMA_ACTIVE_MODULE=1)
  target_link_libraries(${name}_module PRIVATE ardma::active_api ${ARG_DEPS})
  # -z defs: every symbol must resolve at build time; -S: ship without debug sections.
  target_link_options(${name}_module PRIVATE -Wl,-z,defs -Wl,-S)
  set_target_properties(${name}_module PROPERTIES
    PREFIX "" OUTPUT_NAME "ardma_${ARG_ID}" SUFFIX ".so"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/active)

  # The module's bytes, embedded with .incbin, and the descriptor that names them.
  set(embed ${CMAKE_CURRENT_BINARY_DIR}/${name}_embed.cc)
  set(dep_decls "")
  set(dep_refs "")
  foreach(dep ${ARG_LIBRARY_DEPS})
    get_target_property(dep_id ${dep} ARDMA_ACTIVE_ID)
    string(APPEND dep_decls "ARDMA_DECLARE_ACTIVE_LIBRARY(${dep_id});\n")
    string(APPEND dep_refs "&::ardma::active_libraries::${dep_id}(), ")
  endforeach()
  file(GENERATE OUTPUT ${embed} CONTENT
"// Generated by ardma_active_library(${name}). Do not edit.
#include \"core/active/active_library.h\"

__asm__(\".section .rodata.ardma_module_${ARG_ID},\\\"a\\\"\\n\"
        \".balign 64\\n\"
        \".globl ardma_module_${ARG_ID}_begin\\n\"
        \".hidden ardma_module_${ARG_ID}_begin\\n\"
        \"ardma_module_${ARG_ID}_begin:\\n\"
        \".incbin \\\"${PROJECT_BINARY_DIR}/active/ardma_${ARG_ID}.so\\\"\\n\"
        \".globl ardma_module_${ARG_ID}_end\\n\"
        \".hidden ardma_module_${ARG_ID}_end\\n\"
        \"ardma_module_${ARG_ID}_end:\\n\"
        \".previous\\n\");

extern \"C\" const unsigned char ardma_module_${ARG_ID}_begin[];
extern \"C\" const unsigned char ardma_module_${ARG_ID}_end[];
const ::ardma::FunctionTable& ardma_table_${ARG_ID}();
${dep_decls}
namespace ardma::active_libraries {
const ::ardma::ActiveLibrary& ${ARG_ID}() {
  static const ::ardma::ActiveLibrary library(
      ardma_table_${ARG_ID}(), ::ardma::CodeKind::kNative,
      std::string_view(reinterpret_cast<const char*>(ardma_module_${ARG_ID}_begin),
                       static_cast<size_t>(ardma_module_${ARG_ID}_end - ardma_module_${ARG_ID}_begin)),
      {${dep_refs}});
  return library;
}
}  // namespace ardma::active_libraries
")
  add_library(${name} STATIC ${ARG_SRCS} ${embed})
  _ardma_common_options(${name})
  target_link_libraries(${name} PUBLIC ardma::active_library ${ARG_DEPS} ${ARG_LIBRARY_DEPS})
  set_source_files_properties(${embed} PROPERTIES OBJECT_DEPENDS ${PROJECT_BINARY_DIR}/active/ardma_${ARG_ID}.so)
  add_dependencies(${name} ${name}_module)
  set_target_properties(${name} PROPERTIES ARDMA_ACTIVE_ID ${ARG_ID})
  add_library(ardma::${name} ALIAS ${name})
endfunction()
