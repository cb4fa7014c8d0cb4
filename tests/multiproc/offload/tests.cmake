# The offload engine (seed 003): 64 plain threads per process make every kind of request with
# each method, refusals, exceptions that come back, cancellation at the engine's end; 2
# processes x 2 workers over shm, 3 x 1 over tcp, 2 emulated machines over tcp, and mpirun.
seriema_mp_executable(offload_mp_test offload/offload_mp_test.cpp seriema::offload)
seriema_mp_run(mp.offload.np2x2.shm EXE offload_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.offload.np3.tcp EXE offload_mp_test NP 3 TLS tcp ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.offload.np2x2.machines2.tcp EXE offload_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.offload.mpirun_np2.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=1
                   -np 2 $<TARGET_FILE:offload_mp_test>)
  set_tests_properties(mp.offload.mpirun_np2.shm PROPERTIES LABELS multiproc TIMEOUT 300)
endif()
