# The offload engine (seed 003): 64 plain threads per process make every kind of request with
# each method, worker coroutines co_await offload futures, 256 Boost.Fiber fibers per process
# make requests, refusals, exceptions that come back, cancellation at the engine's end; 2
# processes x 2 workers over shm (also with the engines made without options delegating), 3 x 1
# over tcp, 2 emulated machines over tcp, and mpirun.
find_package(Boost REQUIRED COMPONENTS fiber)  # scripts/install-deps.sh: libboost-fiber-dev
seriema_mp_executable(offload_mp_test offload/offload_mp_test.cpp seriema::offload)
target_link_libraries(offload_mp_test PRIVATE Boost::fiber)
seriema_mp_run(mp.offload.np2x2.shm EXE offload_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.offload.np3.tcp EXE offload_mp_test NP 3 TLS tcp ENV SERIEMA_THREADS=1)
# The engines made without options delegating (SERIEMA_OFFLOAD_METHOD), two lanes each.
seriema_mp_run(mp.offload.np2x2.shm.delegate EXE offload_mp_test NP 2
               ENV SERIEMA_THREADS=2 SERIEMA_OFFLOAD_METHOD=delegate SERIEMA_OFFLOAD_EXECUTORS=2)
seriema_mp_run(mp.offload.np2x2.machines2.tcp EXE offload_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.offload.mpirun_np2.shm
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=1
                   -np 2 $<TARGET_FILE:offload_mp_test>)
  set_tests_properties(mp.offload.mpirun_np2.shm PROPERTIES LABELS multiproc TIMEOUT 300)
endif()

# Requests to a process that dies or stalls: 3 processes x 1 thread over shm, tcp and 3
# emulated machines.
seriema_mp_executable(offload_failure_mp_test offload/offload_failure_mp_test.cpp seriema::offload)
seriema_three_rank_failure_suite(offload_failure
                                 ${CMAKE_CURRENT_SOURCE_DIR}/offload/offload_failure_test.sh
                                 offload_failure_mp_test)
