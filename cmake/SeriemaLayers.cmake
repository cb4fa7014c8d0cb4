# The layer targets and their include views: each layer sees its own headers and those below.
#
# All public headers live in include/seriema/<layer>/. A layer's target does not add include/ to
# its include path; it adds a view, <build>/include-views/<layer>, holding one symbolic link
# seriema/<layer> -> include/seriema/<layer>. A target linking a layer sees the views of that
# layer and of every layer it links (usage requirements are transitive), so transfer code that
# includes <seriema/fabric/...> does not compile, while invoke code sees transfer, fabric and
# invoke. tests/layering checks that this keeps failing.

# seriema_add_layer(<layer>): the target seriema_<layer> (alias seriema::<layer>) from every .cpp
# under src/<layer>/, its rooms (sub-folders such as src/fabric/runtime/) included, or an INTERFACE
# target when the layer is headers only. A layer's sources include its private headers by their
# path below src/<layer>/ ("runtime/runtime_internal.hpp"): that folder is on the target's
# private include path, never on its users'.
function(seriema_add_layer layer)
  set(view ${PROJECT_BINARY_DIR}/include-views/${layer})
  file(MAKE_DIRECTORY ${view}/seriema)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/seriema/${layer} ${view}/seriema/${layer} SYMBOLIC)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp)
  set(target seriema_${layer})
  if(sources)
    add_library(${target} ${sources})
    set(scope PUBLIC)
    target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:seriema_build_flags>)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src/${layer})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(seriema::${layer} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
  target_compile_features(${target} ${scope} cxx_std_20)
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${view}>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endfunction()
