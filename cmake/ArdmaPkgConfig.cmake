# pkg-config files for the installed libraries: ardma-NAME.pc for each library NAME of the package
# (pkg-config --cflags --libs --static ardma-dht_client), each requiring the ardma-*.pc of the
# project libraries it links and the system modules (Abseil, OpenSSL, UCX, RE2) of the others.
# Call once, after every target is defined, with the installed library targets.

function(_ardma_pc_requires target out_requires out_libs)
  get_target_property(deps ${target} LINK_LIBRARIES)
  if(NOT deps)
    get_target_property(deps ${target} INTERFACE_LINK_LIBRARIES)
  endif()
  set(requires "")
  set(libs "")
  foreach(dep IN LISTS deps)
    if(dep MATCHES "^ardma::(.+)$")
      list(APPEND requires "ardma-${CMAKE_MATCH_1}")
    elseif(dep MATCHES "^absl::(.+)$")
      list(APPEND requires "absl_${CMAKE_MATCH_1}")
    elseif(dep STREQUAL "OpenSSL::Crypto")
      list(APPEND requires "libcrypto")
    elseif(dep STREQUAL "OpenSSL::SSL")
      list(APPEND requires "libssl")
    elseif(dep STREQUAL "PkgConfig::UCX")
      list(APPEND requires "ucx")
    elseif(dep STREQUAL "PkgConfig::RE2")
      list(APPEND requires "re2")
    elseif(dep STREQUAL "PkgConfig::PCRE2")
      list(APPEND requires "libpcre2-8")
    elseif(dep STREQUAL "PkgConfig::FUSE3")
      list(APPEND requires "fuse3")
    elseif(dep STREQUAL "Threads::Threads")
      list(APPEND libs "-pthread")
    elseif(dep STREQUAL "dl")
      list(APPEND libs "-ldl")
    elseif(dep MATCHES "^\\$<" OR dep MATCHES "^Boost::")
      # generator expressions (none that link) and header-only Boost
    elseif(TARGET ${dep})
      list(APPEND requires "ardma-${dep}")  # an in-tree target named without the alias
    endif()
  endforeach()
  list(REMOVE_DUPLICATES requires)
  string(REPLACE ";" ", " requires "${requires}")
  string(REPLACE ";" " " libs "${libs}")
  set(${out_requires} "${requires}" PARENT_SCOPE)
  set(${out_libs} "${libs}" PARENT_SCOPE)
endfunction()

function(ardma_pkg_config_files)
  file(RELATIVE_PATH to_prefix "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  foreach(target IN LISTS ARGN)
    get_target_property(type ${target} TYPE)
    get_target_property(output ${target} OUTPUT_NAME)
    if(NOT output)
      set(output ${target})
    endif()
    _ardma_pc_requires(${target} requires libs)
    set(lib_flag "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      set(lib_flag "-L\${libdir} -l${output}")
    endif()
    file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/pkgconfig/ardma-${target}.pc CONTENT
"prefix=\${pcfiledir}/${to_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${ARDMA_INSTALL_INCLUDEDIR}

Name: ardma-${target}
Description: Active RDMA toolkit: ${target}
Version: ${PROJECT_VERSION}
Requires: ${requires}
Cflags: -std=c++20 -I\${includedir}
Libs: ${lib_flag} ${libs}
")
    install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/ardma-${target}.pc
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  endforeach()
endfunction()
