# The group module: total order, unordered mode, nulls, ordered calls, a slow member, refusals;
# 1 process x 3 threads, 3 processes x 1 thread over shm, tcp (pushes as the setting says, and by
# put), 3 emulated machines, 2 processes x 2 threads, and under mpirun.
seriema_mp_executable(group_mp_test group/group_mp_test.cpp seriema::group)
seriema_mp_run(mp.group.np1.shm EXE group_mp_test NP 1 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.group.np3.shm EXE group_mp_test NP 3 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.group.np2x2.shm EXE group_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.group.np3.tcp EXE group_mp_test NP 3 TLS tcp ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.group.np3.tcp.put EXE group_mp_test NP 3 TLS tcp
               ENV SERIEMA_THREADS=1 SERIEMA_REMOTE_PUBLISH=put)
seriema_mp_run(mp.group.np3.machines3.tcp EXE group_mp_test NP 3 MACHINES 3 TLS tcp
               ENV SERIEMA_THREADS=1)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.group.mpirun_np3.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=1
                   -np 3 $<TARGET_FILE:group_mp_test>)
  set_tests_properties(mp.group.mpirun_np3.shm PROPERTIES LABELS multiproc TIMEOUT 300)
endif()

# A member that dies or stalls: 3 processes x 1 thread over shm and tcp, and over tcp across 3
# emulated machines.
seriema_mp_executable(group_failure_mp_test group/group_failure_mp_test.cpp seriema::group)
seriema_three_rank_failure_suite(group_failure
                                 ${CMAKE_CURRENT_SOURCE_DIR}/group/group_failure_test.sh
                                 group_failure_mp_test)

# The transport conformance suite (data then flag, push order, whole 64-bit words, atomics beside
# puts, consumption notices) on every configuration: threads of one process, 2 processes over shm,
# over tcp across 2 emulated machines by write messages, by put + fence + put, with notices by
# atomics, and under mpirun.
seriema_mp_executable(conformance_mp_test group/conformance_mp_test.cpp seriema::group)
seriema_mp_run(mp.conformance.np1x2.shm EXE conformance_mp_test NP 1 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.conformance.np2.shm EXE conformance_mp_test NP 2 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.conformance.np2.machines2.tcp EXE conformance_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=1 SERIEMA_REMOTE_PUBLISH=message)
seriema_mp_run(mp.conformance.np2.machines2.tcp.put EXE conformance_mp_test NP 2 MACHINES 2
               TLS tcp ENV SERIEMA_THREADS=1 SERIEMA_REMOTE_PUBLISH=put)
seriema_mp_run(mp.conformance.np2.machines2.tcp.notices_atomic EXE conformance_mp_test NP 2
               MACHINES 2 TLS tcp ENV SERIEMA_THREADS=1 SERIEMA_REMOTE_NOTICES=atomic)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.conformance.mpirun_np2.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=1
                   -np 2 $<TARGET_FILE:conformance_mp_test>)
  set_tests_properties(mp.conformance.mpirun_np2.shm PROPERTIES LABELS multiproc TIMEOUT 300)
endif()
