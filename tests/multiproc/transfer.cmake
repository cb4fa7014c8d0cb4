# Transfer-layer multi-process tests: 2 and 4 processes, shm and tcp, and 2 emulated machines.
seriema_mp_executable(transfer_ops_mp_test transfer_ops_mp_test.cpp seriema::fabric)
foreach(np 2 4)
  seriema_mp_run(mp.transfer_ops.np${np}.shm EXE transfer_ops_mp_test NP ${np})
  seriema_mp_run(mp.transfer_ops.np${np}.tcp EXE transfer_ops_mp_test NP ${np} TLS tcp)
endforeach()
seriema_mp_run(mp.transfer_ops.np2.machines2.shm EXE transfer_ops_mp_test NP 2 MACHINES 2)
seriema_mp_run(mp.transfer_ops.np4.machines2.tcp EXE transfer_ops_mp_test NP 4 MACHINES 2 TLS tcp)

# The same test under mpirun (PMIx bootstrap), over shm and over tcp.
find_program(SERIEMA_MPIRUN mpirun)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.transfer_ops.mpirun_np2.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                   $<TARGET_FILE:transfer_ops_mp_test>)
  add_test(NAME mp.transfer_ops.mpirun_np2.tcp
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x UCX_TLS=tcp,self -np 2
                   $<TARGET_FILE:transfer_ops_mp_test>)
  set_tests_properties(mp.transfer_ops.mpirun_np2.shm mp.transfer_ops.mpirun_np2.tcp
                       PROPERTIES LABELS multiproc TIMEOUT 300)
else()
  message(STATUS "mpirun not found: the PMIx runs of transfer_ops_mp_test are not registered")
endif()
