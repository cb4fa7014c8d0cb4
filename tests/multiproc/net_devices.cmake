# Network-device placement: the automatic choice (devices nearest each process's zone) applied
# to UCX over shm, tcp and 2 emulated machines, an explicit list over tcp (the loopback
# interface, which every host has; UCX reaches only its own host through it, so no MACHINES 2),
# and a list UCX cannot use, which falls back to UCX's choice.
seriema_mp_executable(net_devices_mp_test net_devices_mp_test.cpp seriema::fabric)
seriema_mp_run(mp.net_devices.np2.shm EXE net_devices_mp_test NP 2 TIMEOUT 120
               ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.net_devices.np2.tcp EXE net_devices_mp_test NP 2 TLS tcp TIMEOUT 120
               ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.net_devices.np2.machines2 EXE net_devices_mp_test NP 2 MACHINES 2 TIMEOUT 120
               ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.net_devices.np2.machines2.tcp EXE net_devices_mp_test NP 2 MACHINES 2 TLS tcp
               TIMEOUT 120 ENV SERIEMA_THREADS=2)
seriema_mp_run(mp.net_devices.np2.explicit_lo.tcp EXE net_devices_mp_test NP 2 TLS tcp
               TIMEOUT 120 ARGS --expect-devices=lo
               ENV SERIEMA_THREADS=2 SERIEMA_NET_DEVICES=lo)
seriema_mp_run(mp.net_devices.np2.unusable_falls_back.tcp EXE net_devices_mp_test NP 2
               TLS tcp TIMEOUT 120 ARGS --expect-devices=
               ENV SERIEMA_THREADS=2 SERIEMA_NET_DEVICES=nosuchnic0)
