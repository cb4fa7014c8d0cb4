# Remote invocation tests: 2 processes x 3 threads over shm and tcp, and across 2 emulated
# machines; once with a dedicated service thread.
seriema_mp_executable(invoke_send_mp_test invoke_send_mp_test.cpp seriema::fabric)
# 8 reply cells per thread, so that a test can outrun them.
seriema_mp_run(mp.invoke_send.np2.shm EXE invoke_send_mp_test NP 2
               ENV SERIEMA_THREADS=3 SERIEMA_REPLY_CELLS=8)
seriema_mp_run(mp.invoke_send.np2.tcp EXE invoke_send_mp_test NP 2 TLS tcp
               ENV SERIEMA_THREADS=3 SERIEMA_REPLY_CELLS=8)
seriema_mp_run(mp.invoke_send.np2.machines2.tcp EXE invoke_send_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=3 SERIEMA_REPLY_CELLS=8)
seriema_mp_run(mp.invoke_send.np2.service_thread.shm EXE invoke_send_mp_test NP 2
               ENV SERIEMA_THREADS=2 SERIEMA_SERVICE_THREADS=1 SERIEMA_REPLY_CELLS=8)

# Version skew: different registries are refused at start, over shm and tcp.
seriema_mp_executable(registry_skew_mp_test registry_skew_mp_test.cpp seriema::fabric)
seriema_mp_script_test(mp.registry_skew.np2 SCRIPT registry_skew_test.sh EXE registry_skew_mp_test)
# Address-based function ids: one binary starts, another build of it is refused (two programs
# in one job need mpirun's MPMD launch), over shm and tcp.
find_program(SERIEMA_MPIRUN mpirun)
find_program(SERIEMA_OBJCOPY objcopy)
if(SERIEMA_MPIRUN AND SERIEMA_OBJCOPY)
  foreach(tls default tcp)
    add_test(NAME mp.function_ids.np2.${tls}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/function_ids_test.sh ${SERIEMA_MPIRUN}
                     $<TARGET_FILE:registry_skew_mp_test>)
    set_tests_properties(mp.function_ids.np2.${tls} PROPERTIES LABELS multiproc TIMEOUT 300)
  endforeach()
  set_tests_properties(mp.function_ids.np2.tcp PROPERTIES ENVIRONMENT "UCX_TLS=tcp,self")
else()
  message(STATUS "mpirun or objcopy not found: mp.function_ids (address ids) is not registered")
endif()

# One-sided invocation (Messenger, aggregators): every primitive, FIFO over 1 M calls per mode,
# backpressure, corrupt records and forged write messages; 1 process x 3 threads (intra-process), 2 processes x 3 threads
# over shm, tcp and 2 emulated machines.
# The all-to-all stress runs 2 processes x 2 threads over shm and tcp.
seriema_mp_executable(invoke_onesided_mp_test invoke_onesided_mp_test.cpp seriema::invoke)
seriema_mp_run(mp.invoke_onesided.np1.shm EXE invoke_onesided_mp_test NP 1
               ARGS --gtest_filter=-*AllToAll* ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_onesided.np2.shm EXE invoke_onesided_mp_test NP 2
               ARGS --gtest_filter=-*AllToAll* ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_onesided.np2.tcp EXE invoke_onesided_mp_test NP 2 TLS tcp
               ARGS --gtest_filter=-*AllToAll* ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_onesided.np2.machines2.tcp EXE invoke_onesided_mp_test NP 2 MACHINES 2
               TLS tcp ARGS --gtest_filter=-*AllToAll*:*Fifo* ENV SERIEMA_THREADS=3)
# The same across machines with staged records published by put, fence, put instead of the
# write message that tcp gets by default (SERIEMA_REMOTE_PUBLISH=auto).
seriema_mp_run(mp.invoke_onesided.np2.machines2.put.tcp EXE invoke_onesided_mp_test NP 2
               MACHINES 2 TLS tcp ARGS --gtest_filter=-*AllToAll*:*Fifo*
               ENV SERIEMA_THREADS=3 SERIEMA_REMOTE_PUBLISH=put)
# Joins through the window on the staged path with the smallest staging units: windows end at
# the unit's room (not the flush size) and at chunk ends, every few hundred calls.
seriema_mp_run(mp.invoke_onesided.np2.machines2.small_staging.tcp EXE invoke_onesided_mp_test
               NP 2 MACHINES 2 TLS tcp
               ARGS --gtest_filter=*TradRuns*:*AggregatorTo*:*ThrowInARepeated*:*FifoTrad*
               ENV SERIEMA_THREADS=3 SERIEMA_STAGING_SIZE=4K TEST_FIFO_CALLS=200000)
# An explicit SERIEMA_FLUSH_SIZE wins over the automatic choice on both paths.
seriema_mp_run(mp.invoke_onesided.np2.flush16k.shm EXE invoke_onesided_mp_test NP 2
               ARGS --gtest_filter=*TradBatches* ENV SERIEMA_THREADS=3 SERIEMA_FLUSH_SIZE=16K)
seriema_mp_run(mp.invoke_onesided.np2.machines2.flush16k.tcp EXE invoke_onesided_mp_test NP 2
               MACHINES 2 TLS tcp ARGS --gtest_filter=*TradBatches*
               ENV SERIEMA_THREADS=3 SERIEMA_FLUSH_SIZE=16K)
seriema_mp_run(mp.invoke_stress.np2x2.shm EXE invoke_onesided_mp_test NP 2
               ARGS --gtest_filter=*AllToAll* ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.invoke_stress.np2x2.tcp EXE invoke_onesided_mp_test NP 2 TLS tcp
               ARGS --gtest_filter=*AllToAll* ENV SERIEMA_THREADS=2)

# FIFO per (sender thread, destination) for calls that handlers make with retry_async while the
# rings are full, queued and growing: 3 processes x 1 thread (the sequencer benchmark's shape)
# over shm, tcp and 3 emulated machines, and 1 process x 3 threads.
seriema_mp_executable(invoke_fifo_mp_test invoke_fifo_mp_test.cpp seriema::invoke)
seriema_mp_run(mp.invoke_fifo.np1.shm EXE invoke_fifo_mp_test NP 1 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_fifo.np3.shm EXE invoke_fifo_mp_test NP 3 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.invoke_fifo.np3.tcp EXE invoke_fifo_mp_test NP 3 TLS tcp ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.invoke_fifo.np3.machines3.tcp EXE invoke_fifo_mp_test NP 3 MACHINES 3 TLS tcp
               ENV SERIEMA_THREADS=1)

# Peer death: 10 000 calls in flight to a rank that dies; errors within 5 s, over shm and tcp.
seriema_mp_executable(invoke_peer_death_mp_test invoke_peer_death_mp_test.cpp seriema::invoke)
seriema_mp_script_test(mp.invoke_peer_death.np2 SCRIPT invoke_peer_death_test.sh
                       EXE invoke_peer_death_mp_test TIMEOUT 180)

# Serialized arguments, synchronizer notices and call_buffer_get's variants in every channel:
# intra-process (1 process x 3 threads), 2 processes x 3 threads over shm, tcp and 2 emulated
# machines.
seriema_mp_executable(invoke_features_mp_test invoke_features_mp_test.cpp seriema::invoke)
seriema_mp_run(mp.invoke_features.np1.shm EXE invoke_features_mp_test NP 1 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_features.np2.shm EXE invoke_features_mp_test NP 2 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_features.np2.tcp EXE invoke_features_mp_test NP 2 TLS tcp
               ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.invoke_features.np2.machines2.tcp EXE invoke_features_mp_test NP 2 MACHINES 2
               TLS tcp ENV SERIEMA_THREADS=3)
# Consumption notices across machines by one-sided atomic add (what auto chooses on RDMA
# networks; UCX emulates the atomics over tcp): synchronizers, broadcasts, the notices test.
# Every feature with address-based function ids (SERIEMA_FUNCTION_IDS=address).
seriema_mp_run(mp.invoke_features.np2.address_ids.shm EXE invoke_features_mp_test NP 2
               ENV SERIEMA_THREADS=3 SERIEMA_FUNCTION_IDS=address)
seriema_mp_run(mp.invoke_features.np2.machines2.address_ids.tcp EXE invoke_features_mp_test NP 2
               MACHINES 2 TLS tcp ENV SERIEMA_THREADS=3 SERIEMA_FUNCTION_IDS=address)
seriema_mp_run(mp.invoke_features.np2.machines2.atomic_notices.tcp EXE invoke_features_mp_test
               NP 2 MACHINES 2 TLS tcp
               ARGS --gtest_filter=*Synchroniz*:*Broadcast*:*Notices*:*GetVariants*
               ENV SERIEMA_THREADS=3 SERIEMA_REMOTE_NOTICES=atomic)

# Failure semantics: a callee killed with 10 000 call_returns in flight (send and one-sided);
# every slot ends with its outcome, a third rank keeps working, run() names the dead rank.
seriema_mp_executable(failure_semantics_mp_test failure_semantics_mp_test.cpp seriema::invoke)
seriema_mp_script_test(mp.failure_semantics.np3 SCRIPT failure_semantics_test.sh
                       EXE failure_semantics_mp_test TIMEOUT 300)
add_test(NAME mp.failure_semantics.np3.machines3.tcp
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/failure_semantics_test.sh $<TARGET_FILE:seriema-run>
                 $<TARGET_FILE:failure_semantics_mp_test> --machines 3)
set_tests_properties(mp.failure_semantics.np3.machines3.tcp PROPERTIES LABELS multiproc
                     TIMEOUT 300 ENVIRONMENT "UCX_TLS=tcp,self")

# Failures every rank survives: unknown function ids, sizes at and beyond the limits, deadlines
# and cancellation, calls and exceptions from handlers after the body, finalize inside run().
seriema_mp_executable(failure_handling_mp_test failure_handling_mp_test.cpp seriema::invoke)
seriema_mp_run(mp.failure_handling.np1.shm EXE failure_handling_mp_test NP 1 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.failure_handling.np2.shm EXE failure_handling_mp_test NP 2 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.failure_handling.np2.tcp EXE failure_handling_mp_test NP 2 TLS tcp
               ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.failure_handling.np2.machines2.tcp EXE failure_handling_mp_test NP 2 MACHINES 2
               TLS tcp ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.failure_handling.np4.shm EXE failure_handling_mp_test NP 4 ENV SERIEMA_THREADS=2)

# The invoke tests with 4 processes (2 threads each), and once under mpirun (PMIx bootstrap).
seriema_mp_run(mp.invoke_send.np4.shm EXE invoke_send_mp_test NP 4
               ENV SERIEMA_THREADS=2 SERIEMA_REPLY_CELLS=8)
seriema_mp_run(mp.invoke_send.np4.machines2.tcp EXE invoke_send_mp_test NP 4 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2 SERIEMA_REPLY_CELLS=8)
seriema_mp_run(mp.invoke_onesided.np4.shm EXE invoke_onesided_mp_test NP 4
               ARGS --gtest_filter=-*AllToAll*:*Fifo* ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.invoke_onesided.np4.tcp EXE invoke_onesided_mp_test NP 4 TLS tcp
               ARGS --gtest_filter=-*AllToAll*:*Fifo* ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.invoke_features.np4.shm EXE invoke_features_mp_test NP 4 ENV SERIEMA_THREADS=2)
find_program(SERIEMA_MPIRUN mpirun)
if(SERIEMA_MPIRUN)
  foreach(exe invoke_send_mp_test invoke_onesided_mp_test invoke_features_mp_test)
    string(REPLACE "_mp_test" "" short ${exe})
    add_test(NAME mp.${short}.mpirun_np2.shm
             COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=2
                     -x SERIEMA_REPLY_CELLS=8
                     -np 2 $<TARGET_FILE:${exe}> --gtest_filter=-*AllToAll*:*Fifo*)
    set_tests_properties(mp.${short}.mpirun_np2.shm PROPERTIES LABELS multiproc TIMEOUT 300)
  endforeach()
endif()

# A network partition between two ranks in their own network namespaces (root only: skipped
# otherwise): calls with a 2 s deadline fail by 3 s, and work again after the heal.
seriema_mp_executable(partition_mp_test partition_mp_test.cpp seriema::invoke)
add_test(NAME mp.partition.np2.tcp
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/partition_test.sh $<TARGET_FILE:seriema-run>
                 $<TARGET_FILE:partition_mp_test>)
set_tests_properties(mp.partition.np2.tcp PROPERTIES LABELS multiproc TIMEOUT 300
                     SKIP_RETURN_CODE 77)

# Shutdown with calls in flight on every channel, both sides, two runs, finalize twice: each
# call runs once, each kept reply arrives once, every step ends within 5 s (shm, tcp, machines).
seriema_mp_executable(shutdown_mp_test shutdown_mp_test.cpp seriema::invoke)
seriema_mp_run(mp.shutdown.np2.shm EXE shutdown_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.shutdown.np2.tcp EXE shutdown_mp_test NP 2 TLS tcp ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.shutdown.np2.machines2.tcp EXE shutdown_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2)

# Collectives end by their deadline with a rank stalled (SIGSTOP), then refuse to run again:
# 2 and 3 processes, shm and tcp, and 3 emulated machines.
seriema_mp_executable(collective_deadline_mp_test collective_deadline_mp_test.cpp seriema::fabric)
seriema_mp_run(mp.collective_deadline.np2.shm EXE collective_deadline_mp_test NP 2
               ENV SERIEMA_TIMEOUT=3s)
seriema_mp_run(mp.collective_deadline.np3.tcp EXE collective_deadline_mp_test NP 3 TLS tcp
               ENV SERIEMA_TIMEOUT=3s)
seriema_mp_run(mp.collective_deadline.np3.machines3.tcp EXE collective_deadline_mp_test NP 3
               MACHINES 3 TLS tcp ENV SERIEMA_TIMEOUT=3s)

# The layout of the futures, coroutines and quiesce suites: <name>_mp_test with 1 x 3 threads
# and 2 x 3 over shm, tcp and two emulated machines, and 2 x 2 under mpirun.
function(seriema_invoke_api_suite name)
  seriema_mp_run(mp.${name}.np1.shm EXE ${name}_mp_test NP 1 ENV SERIEMA_THREADS=3)
  seriema_mp_run(mp.${name}.np2.shm EXE ${name}_mp_test NP 2 ENV SERIEMA_THREADS=3)
  seriema_mp_run(mp.${name}.np2.tcp EXE ${name}_mp_test NP 2 TLS tcp ENV SERIEMA_THREADS=3)
  seriema_mp_run(mp.${name}.np2.machines2.tcp EXE ${name}_mp_test NP 2 MACHINES 2 TLS tcp
                 ENV SERIEMA_THREADS=3)
  if(SERIEMA_MPIRUN)
    add_test(NAME mp.${name}.mpirun_np2.shm
             COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -x SERIEMA_THREADS=2
                     -np 2 $<TARGET_FILE:${name}_mp_test>)
    set_tests_properties(mp.${name}.mpirun_np2.shm PROPERTIES LABELS multiproc TIMEOUT 300)
  endif()
endfunction()

# A 3-rank failure scenario (tests/support/three_rank_failure.sh: rank 1 dies, then stalls) as
# mp.<name>.np3.{default,tcp,machines3.tcp}: `script` runs `exe` under seriema-run over shm, tcp,
# and tcp across 3 emulated machines.
function(seriema_three_rank_failure_suite name script exe)
  foreach(variant default tcp machines3.tcp)
    set(extra "")
    if(variant STREQUAL "machines3.tcp")
      set(extra --machines 3)
    endif()
    add_test(NAME mp.${name}.np3.${variant}
             COMMAND ${script} $<TARGET_FILE:seriema-run> $<TARGET_FILE:${exe}> ${extra})
    set_tests_properties(mp.${name}.np3.${variant} PROPERTIES LABELS multiproc TIMEOUT 300)
    if(variant MATCHES "tcp$")
      set_tests_properties(mp.${name}.np3.${variant} PROPERTIES ENVIRONMENT "UCX_TLS=tcp,self")
    endif()
  endforeach()
endfunction()

# Futures: values of every kind, remote exceptions, failure outcomes, continuations and
# combinators, attached threads; 1 process x 3 threads, 2 x 3 over shm, tcp and 2 emulated
# machines, and under mpirun.
seriema_mp_executable(futures_mp_test futures_mp_test.cpp seriema::invoke)
seriema_invoke_api_suite(futures)

# Coroutines: a distributed list walked with co_await, deferred replies, failures through
# co_await, spawned tasks, coroutine run() bodies; as the futures test.
seriema_mp_executable(coroutines_mp_test coroutines_mp_test.cpp seriema::invoke)
seriema_invoke_api_suite(coroutines)

# Worker-callable quiescence: phases of batched calls that call onward, spawned tasks awaiting
# deferred replies, the attached-thread refusal; 1 x 3 and 2 x 3 threads over shm, tcp, two
# emulated machines and mpirun. Then a rank that comes late: quiesce ends by its deadline.
seriema_mp_executable(quiesce_mp_test quiesce_mp_test.cpp seriema::invoke)
seriema_invoke_api_suite(quiesce)
# Back-to-back quiesces with six workers on the machine's two cores: the race of a follower
# preempted between arriving and reading the leader's round counter (it hung every run before
# the fix, at 20 s).
seriema_mp_run(mp.quiesce_back_to_back.np1.threads6.shm EXE quiesce_mp_test NP 1 TIMEOUT 120
               ARGS --gtest_filter=Quiesce.BackToBackQuiescesEnd ENV SERIEMA_THREADS=6)
seriema_mp_executable(quiesce_deadline_mp_test quiesce_deadline_mp_test.cpp seriema::fabric)
seriema_mp_run(mp.quiesce_deadline.np2.shm EXE quiesce_deadline_mp_test NP 2 TIMEOUT 60
               ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.quiesce_deadline.np2.machines2.tcp EXE quiesce_deadline_mp_test NP 2 MACHINES 2
               TLS tcp TIMEOUT 60 ENV SERIEMA_THREADS=1)
