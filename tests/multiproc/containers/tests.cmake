# The containers module: map operations of every kind (trivially copyable and serialized keys
# and values), from every worker to every other; 1 process x 3 threads, 2 x 3 over shm, tcp and
# 2 emulated machines, under mpirun, and 4 processes x 1 thread.
seriema_mp_executable(containers_map_mp_test containers/map_mp_test.cpp seriema::containers)
seriema_invoke_api_suite(containers_map)
seriema_mp_run(mp.containers_map.np4.shm EXE containers_map_mp_test NP 4 ENV SERIEMA_THREADS=1)
seriema_mp_run(mp.containers_map.np4.machines2.tcp EXE containers_map_mp_test NP 4 MACHINES 2
               TLS tcp ENV SERIEMA_THREADS=1)

# counting_set: a skewed stream counted from every worker, with the sender-side cache (1024
# slots, one slot) and without; the same placements as the map.
seriema_mp_executable(containers_counting_set_mp_test containers/counting_set_mp_test.cpp
                      seriema::containers)
seriema_invoke_api_suite(containers_counting_set)
seriema_mp_run(mp.containers_counting_set.np4.machines2.tcp EXE containers_counting_set_mp_test
               NP 4 MACHINES 2 TLS tcp ENV SERIEMA_THREADS=1)

# array: block and cyclic, sums from every worker, strings, fewer elements than workers.
seriema_mp_executable(containers_array_mp_test containers/array_mp_test.cpp seriema::containers)
seriema_invoke_api_suite(containers_array)
seriema_mp_run(mp.containers_array.np4.machines2.tcp EXE containers_array_mp_test NP 4
               MACHINES 2 TLS tcp ENV SERIEMA_THREADS=1)

# set: overlapping inserts and erases from every worker, integer and string keys.
seriema_mp_executable(containers_set_mp_test containers/set_mp_test.cpp seriema::containers)
seriema_invoke_api_suite(containers_set)

# bag: round-robin inserts, gather, rebalance of a lopsided bag, integer and string values.
seriema_mp_executable(containers_bag_mp_test containers/bag_mp_test.cpp seriema::containers)
seriema_invoke_api_suite(containers_bag)

# An owner's process killed after a barrier: 3 processes x 1 thread over shm and tcp, and over
# tcp across 3 emulated machines.
seriema_mp_executable(containers_map_failure_mp_test containers/map_failure_mp_test.cpp
                      seriema::containers)
seriema_three_rank_failure_suite(containers_map_failure
                                 ${CMAKE_CURRENT_SOURCE_DIR}/containers/map_failure_test.sh
                                 containers_map_failure_mp_test)

# disjoint_set: random unites from every worker checked against a sequential union-find (integer
# and string keys), unite_and_run once per merge, an empty set and one pair everywhere.
seriema_mp_executable(containers_disjoint_set_mp_test containers/disjoint_set_mp_test.cpp
                      seriema::containers)
seriema_invoke_api_suite(containers_disjoint_set)

# containers::post and ask from attached threads of every process, concurrently with the workers;
# a container gone before the ask arrived.
seriema_mp_executable(containers_any_thread_mp_test containers/any_thread_mp_test.cpp
                      seriema::containers)
seriema_invoke_api_suite(containers_any_thread)

# Limits: more keys than a map's bound, one key from every worker, empty containers, a key that
# fails to deserialize at its owner, a container made on a thread without containers.
seriema_mp_executable(containers_limits_mp_test containers/limits_mp_test.cpp seriema::containers)
seriema_invoke_api_suite(containers_limits)
