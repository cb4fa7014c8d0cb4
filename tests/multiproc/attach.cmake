# Threads attached with runtime::attach (2 processes x 2 workers, the default 4 attach slots and
# 1 helper thread) over shm and tcp, and across 2 emulated machines.
seriema_mp_executable(attach_mp_test attach_mp_test.cpp seriema::invoke)
seriema_mp_run(mp.attach.np2.shm EXE attach_mp_test NP 2 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.attach.np2.tcp EXE attach_mp_test NP 2 TLS tcp ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.attach.np2.machines2.tcp EXE attach_mp_test NP 2 MACHINES 2 TLS tcp
               ENV SERIEMA_THREADS=2)
