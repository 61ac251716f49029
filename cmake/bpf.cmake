# Compiles BPF C sources with clang's BPF backend and generates libbpf skeleton headers.
find_program(XAGG_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(XAGG_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)
execute_process(COMMAND gcc -dumpmachine OUTPUT_VARIABLE XAGG_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE)

set(XAGG_BPF_OUT ${CMAKE_BINARY_DIR}/bpf)
file(MAKE_DIRECTORY ${XAGG_BPF_OUT})

# xagg_bpf_program(NAME): bpf/NAME.bpf.c -> build/bpf/NAME.bpf.o and build/bpf/NAME.skel.h,
# exposed as the interface library xagg_bpf_NAME (its users include "bpf/NAME.skel.h").
function(xagg_bpf_program name)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.bpf.c)
  set(obj ${XAGG_BPF_OUT}/${name}.bpf.o)
  set(skel ${XAGG_BPF_OUT}/${name}.skel.h)
  file(GLOB bpf_headers ${CMAKE_CURRENT_SOURCE_DIR}/*.h ${CMAKE_SOURCE_DIR}/include/xagg/*.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${XAGG_CLANG} -O2 -g -target bpf -mcpu=v3 -Wall -Wextra -Werror
            -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}
            -I/usr/include/${XAGG_MULTIARCH} -c ${src} -o ${obj}
    DEPENDS ${src} ${bpf_headers}
    COMMENT "BPF ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${XAGG_BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}
    DEPENDS ${obj}
    COMMENT "skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(xagg_bpf_${name}_gen ALL DEPENDS ${skel})
  add_library(xagg_bpf_${name} INTERFACE)
  add_dependencies(xagg_bpf_${name} xagg_bpf_${name}_gen)
  target_include_directories(xagg_bpf_${name} SYSTEM INTERFACE ${CMAKE_BINARY_DIR})
  target_link_libraries(xagg_bpf_${name} INTERFACE PkgConfig::LIBBPF)
endfunction()
