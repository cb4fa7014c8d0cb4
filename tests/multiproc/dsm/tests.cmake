# The dsm module (shared spaces): false sharing, producer/consumer with fast reads, a value round
# the ring of workers, allocation, mutexes and acquire/release atomics, parallel_for,
# fault-driven access (plain loads and stores; a fault outside the space), the litmus tests
# (load buffering, write-to-read causality, read-read coherence, store buffering),
# the fixed-home baseline's directory, refusals;
# 1 process x 3 threads, 3 x 1 and 2 x 2 over shm, 3 x 1 over tcp (write messages, and put), 2
# emulated machines over tcp, and under mpirun; and the suite on the fixed-home protocol over shm
# and 2 emulated machines.
seriema_mp_executable(dsm_mp_test dsm/dsm_mp_test.cpp seriema::dsm)
seriema_mp_run(mp.dsm.np1.shm EXE dsm_mp_test NP 1 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.dsm.np3.shm EXE dsm_mp_test NP 3 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.dsm.np2x2.shm EXE dsm_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.dsm.np3.tcp EXE dsm_mp_test NP 3 TLS tcp ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.dsm.np3.tcp.put EXE dsm_mp_test NP 3 TLS tcp
               ENV SERIEMA_THREADS=1 SERIEMA_REMOTE_PUBLISH=put)
seriema_mp_run(mp.dsm.np2x2.machines2.tcp EXE dsm_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2)
# The same suite on the fixed-home baseline (coherence_protocol::fixed_home).
seriema_mp_run(mp.dsm.np3.shm.fixed EXE dsm_mp_test NP 3
               ENV SERIEMA_THREADS=1 TEST_DSM_PROTOCOL=fixed)
seriema_mp_run(mp.dsm.np2x2.machines2.tcp.fixed EXE dsm_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2 TEST_DSM_PROTOCOL=fixed)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.dsm.mpirun_np2.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=1
                   -np 2 $<TARGET_FILE:dsm_mp_test>)
  set_tests_properties(mp.dsm.mpirun_np2.shm PROPERTIES LABELS multiproc TIMEOUT 300)
endif()

# A process that dies or stalls holding a mutex, a block's only master and an atomic's value:
# 3 processes x 1 thread over shm, tcp and 3 emulated machines.
seriema_mp_executable(dsm_failure_mp_test dsm/dsm_failure_mp_test.cpp seriema::dsm)
seriema_three_rank_failure_suite(dsm_failure ${CMAKE_CURRENT_SOURCE_DIR}/dsm/dsm_failure_test.sh
                                 dsm_failure_mp_test)
