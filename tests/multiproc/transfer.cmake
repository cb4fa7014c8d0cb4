# Transfer-layer multi-process tests: 2 and 4 processes, shm and tcp, and 2 emulated machines.
# The shared-transmitter test makes 20 000 puts per thread, each waiting for its own completion
# (a round trip over tcp): the 2-process runs carry that volume; the 4-process tcp runs and the
# mpirun run (there for the PMIx bootstrap) repeat the same code paths with 2 000
# (TEST_TRANSFER_PUTS), which took them from about 70 s to a few seconds each on 2 cores.
set(transfer_puts_repeated TEST_TRANSFER_PUTS=2000)
seriema_mp_executable(transfer_ops_mp_test transfer_ops_mp_test.cpp seriema::fabric)
seriema_mp_run(mp.transfer_ops.np2.shm EXE transfer_ops_mp_test NP 2)
seriema_mp_run(mp.transfer_ops.np2.tcp EXE transfer_ops_mp_test NP 2 TLS tcp)
seriema_mp_run(mp.transfer_ops.np4.shm EXE transfer_ops_mp_test NP 4)
seriema_mp_run(mp.transfer_ops.np4.tcp EXE transfer_ops_mp_test NP 4 TLS tcp
               ENV ${transfer_puts_repeated})
seriema_mp_run(mp.transfer_ops.np2.machines2.shm EXE transfer_ops_mp_test NP 2 MACHINES 2)
seriema_mp_run(mp.transfer_ops.np4.machines2.tcp EXE transfer_ops_mp_test NP 4 MACHINES 2 TLS tcp
               ENV ${transfer_puts_repeated})

# The same test under mpirun (PMIx bootstrap), over shm and over tcp.
find_program(SERIEMA_MPIRUN mpirun)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.transfer_ops.mpirun_np2.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                   $<TARGET_FILE:transfer_ops_mp_test>)
  add_test(NAME mp.transfer_ops.mpirun_np2.tcp
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x UCX_TLS=tcp,self
                   -x ${transfer_puts_repeated} -np 2 $<TARGET_FILE:transfer_ops_mp_test>)
  set_tests_properties(mp.transfer_ops.mpirun_np2.shm mp.transfer_ops.mpirun_np2.tcp
                       PROPERTIES LABELS multiproc TIMEOUT 300)
else()
  message(STATUS "mpirun not found: the PMIx runs of transfer_ops_mp_test are not registered")
endif()
