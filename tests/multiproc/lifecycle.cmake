# A rank that leaves before finalize (std::exit in its body, a return from main, a kill before any
# traffic), run(body, deadline) with a stalled rank, and seriema-run --time-limit: 3 processes
# over shm, tcp and 2 emulated machines, and the same failures under mpirun (PMIx).
seriema_mp_executable(lifecycle_mp_test lifecycle_mp_test.cpp seriema::fabric)
seriema_mp_script_test(mp.lifecycle.np3 SCRIPT lifecycle_test.sh EXE lifecycle_mp_test TIMEOUT 300)
add_test(NAME mp.lifecycle.np3.machines2.tcp
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lifecycle_test.sh $<TARGET_FILE:seriema-run>
                 $<TARGET_FILE:lifecycle_mp_test> --machines 2)
set_tests_properties(mp.lifecycle.np3.machines2.tcp PROPERTIES LABELS multiproc TIMEOUT 300
                     ENVIRONMENT "UCX_TLS=tcp,self")
find_program(SERIEMA_MPIRUN mpirun)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.lifecycle.mpirun_np3
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lifecycle_mpirun_test.sh ${SERIEMA_MPIRUN}
                   $<TARGET_FILE:lifecycle_mp_test>)
  set_tests_properties(mp.lifecycle.mpirun_np3 PROPERTIES LABELS multiproc TIMEOUT 300)
endif()
