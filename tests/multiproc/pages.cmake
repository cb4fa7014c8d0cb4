# Huge pages by default: the script reserves 2 MiB pages (root), checks seriema-info and a
# 2-process job on them (shm, tcp, two emulated machines), then the reported fallback without
# them. Serial: the reservation and the THP mode are machine-wide. Skipped (77) when /sys refuses.
seriema_mp_executable(huge_pages_mp_test huge_pages_mp_test.cpp seriema::invoke)
if(TARGET seriema-info)
  foreach(variant shm tcp machines2)
    add_test(NAME mp.huge_pages.np2.${variant}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/huge_pages_test.sh $<TARGET_FILE:seriema-run>
                     $<TARGET_FILE:huge_pages_mp_test> $<TARGET_FILE:seriema-info> ${variant})
    set_tests_properties(mp.huge_pages.np2.${variant} PROPERTIES LABELS multiproc TIMEOUT 600
                         SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
  endforeach()
endif()
