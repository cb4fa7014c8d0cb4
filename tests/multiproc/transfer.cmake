# Transfer-layer multi-process tests: 2 and 4 processes, shm and tcp, and 2 emulated machines.
seriema_mp_executable(transfer_ops_mp_test transfer_ops_mp_test.cpp seriema::fabric)
foreach(np 2 4)
  seriema_mp_run(mp.transfer_ops.np${np}.shm EXE transfer_ops_mp_test NP ${np})
  seriema_mp_run(mp.transfer_ops.np${np}.tcp EXE transfer_ops_mp_test NP ${np} TLS tcp)
endforeach()
seriema_mp_run(mp.transfer_ops.np2.machines2.shm EXE transfer_ops_mp_test NP 2 MACHINES 2)
seriema_mp_run(mp.transfer_ops.np4.machines2.tcp EXE transfer_ops_mp_test NP 4 MACHINES 2 TLS tcp)
