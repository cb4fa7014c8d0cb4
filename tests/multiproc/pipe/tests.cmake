# The pipe module: rings of pipes over every worker (irregular sizes in order, every fit policy
# and write protocol, a slow reader), duplex ping-pong, refusals, open failures; 1 process x 3
# threads, 2 x 3 over shm, tcp and 2 emulated machines, and under mpirun.
seriema_mp_executable(pipe_mp_test pipe/pipe_mp_test.cpp seriema::pipe)
seriema_invoke_api_suite(pipe)
