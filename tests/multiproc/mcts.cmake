# Distributed MCTS on Hex: 1 process x 1 (remote-only calls to itself) and x 2 threads, 2 processes x 1 thread (the issue's minimum)
# and 2 x 2, over shm and tcp, and across 2 emulated machines.
seriema_mp_executable(mcts_mp_test mcts_mp_test.cpp seriema_hex_game)
seriema_mp_run(mp.mcts.np1x1.shm EXE mcts_mp_test NP 1 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.mcts.np1x2.shm EXE mcts_mp_test NP 1 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.mcts.np2x1.shm EXE mcts_mp_test NP 2 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.mcts.np2x1.tcp EXE mcts_mp_test NP 2 TLS tcp ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.mcts.np2x2.shm EXE mcts_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.mcts.np2x2.machines2.tcp EXE mcts_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2)

# The seriema-hex program as a user runs it (analyze, play, a scripted GTP session) over 2
# processes: shared memory, and TCP between 2 emulated machines.
if(TARGET seriema-hex)
  add_test(NAME mp.seriema_hex.np2.shm
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/seriema_hex_test.sh $<TARGET_FILE:seriema-run>
                   $<TARGET_FILE:seriema-hex>)
  add_test(NAME mp.seriema_hex.np2.machines2.tcp
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/seriema_hex_test.sh $<TARGET_FILE:seriema-run>
                   $<TARGET_FILE:seriema-hex> --machines 2)
  set_tests_properties(mp.seriema_hex.np2.shm mp.seriema_hex.np2.machines2.tcp PROPERTIES
                       LABELS multiproc TIMEOUT 300)
  set_tests_properties(mp.seriema_hex.np2.machines2.tcp PROPERTIES ENVIRONMENT "UCX_TLS=tcp,self")
endif()

# The distributed search under mpirun (PMIx bootstrap), 2 processes x 2 threads.
find_program(SERIEMA_MPIRUN mpirun)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.mcts.mpirun_np2x2
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                   -x SERIEMA_THREADS=2 $<TARGET_FILE:mcts_mp_test>)
  set_tests_properties(mp.mcts.mpirun_np2x2 PROPERTIES LABELS multiproc TIMEOUT 300)
endif()
