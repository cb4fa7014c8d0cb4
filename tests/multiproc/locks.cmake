# Remote atomics and the distributed lock under contention: 2 processes x 3 threads over shm and
# tcp, and across 2 emulated machines (tcp between them).
seriema_mp_executable(locks_mp_test locks_mp_test.cpp seriema::fabric)
seriema_mp_run(mp.locks.np2.shm EXE locks_mp_test NP 2 ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.locks.np2.tcp EXE locks_mp_test NP 2 TLS tcp ENV SERIEMA_THREADS=3)
seriema_mp_run(mp.locks.np2.machines2.tcp EXE locks_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=3)
# 4 processes on 2 emulated machines with the default transports: the same words are reached
# over shm by the processes of their machine and over tcp by the others at once. 8 threads on a
# loaded 2-core machine spend 50-75 ms per critical section: 40 per thread keeps it well inside
# the time limit while every waiter still queues behind the others many times.
seriema_mp_run(mp.locks.np4.machines2 EXE locks_mp_test NP 4 MACHINES 2
               ENV SERIEMA_THREADS=2 LOCKS_MP_ROUNDS=40)

# The holder dies holding the lock (3 processes x 1 thread): waiters end at their deadline, an
# atomic on the dead rank fails, the survivors exit cleanly; shm and tcp, and 3 emulated machines.
seriema_mp_executable(lock_holder_death_mp_test lock_holder_death_mp_test.cpp seriema::fabric)
seriema_mp_script_test(mp.lock_holder_death.np3 SCRIPT lock_holder_death_test.sh
                       EXE lock_holder_death_mp_test TIMEOUT 180)
add_test(NAME mp.lock_holder_death.np3.machines3.tcp
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lock_holder_death_test.sh $<TARGET_FILE:seriema-run>
                 $<TARGET_FILE:lock_holder_death_mp_test> --machines 3)
set_tests_properties(mp.lock_holder_death.np3.machines3.tcp PROPERTIES LABELS multiproc
                     TIMEOUT 180 ENVIRONMENT "UCX_TLS=tcp,self")
