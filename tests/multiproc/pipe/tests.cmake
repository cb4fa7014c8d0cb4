# The pipe module: rings of pipes over every worker (irregular sizes in order, every fit policy
# and write protocol, a slow reader), duplex ping-pong, the pull direction, the futures of the
# waits, refusals, open failures; 1 process x 3
# threads, 2 x 3 over shm, tcp and 2 emulated machines, and under mpirun.
seriema_mp_executable(pipe_mp_test pipe/pipe_mp_test.cpp seriema::pipe)
seriema_invoke_api_suite(pipe)

# Redirection (buffers forwarded round a ring of workers, in place or copied) and reduction (k
# writers into one reader); as the pipe suite.
seriema_mp_executable(pipe_forward_mp_test pipe/pipe_forward_mp_test.cpp seriema::pipe)
seriema_invoke_api_suite(pipe_forward)

# A peer that dies or stalls: 3 processes x 1 thread over shm and tcp, and over tcp across 3
# emulated machines.
seriema_mp_executable(pipe_failure_mp_test pipe/pipe_failure_mp_test.cpp seriema::pipe)
seriema_three_rank_failure_suite(pipe_failure ${CMAKE_CURRENT_SOURCE_DIR}/pipe/pipe_failure_test.sh
                                 pipe_failure_mp_test)
