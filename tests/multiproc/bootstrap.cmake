# Bootstrap multi-process tests: the launcher with 1, 2 and 4 ranks (also as 2 emulated
# machines), PMIx under mpirun, and the failure scenarios driven by bootstrap_failure_test.
seriema_mp_executable(bootstrap_mp_test ${CMAKE_CURRENT_SOURCE_DIR}/bootstrap_mp_test.cpp
                      seriema::fabric)

seriema_mp_run(mp.bootstrap.np1 EXE bootstrap_mp_test NP 1 TIMEOUT 120
               ARGS --np 1 --machines 1 --mode seriema-run)
seriema_mp_run(mp.bootstrap.np2 EXE bootstrap_mp_test NP 2 TIMEOUT 120
               ARGS --np 2 --machines 1 --mode seriema-run)
seriema_mp_run(mp.bootstrap.np4 EXE bootstrap_mp_test NP 4 TIMEOUT 120
               ARGS --np 4 --machines 1 --mode seriema-run)
seriema_mp_run(mp.bootstrap.np4_machines2 EXE bootstrap_mp_test NP 4 MACHINES 2 TIMEOUT 120
               ARGS --np 4 --machines 2 --mode seriema-run)

add_executable(bootstrap_failure_test ${CMAKE_CURRENT_SOURCE_DIR}/bootstrap_failure_test.cpp)
target_link_libraries(bootstrap_failure_test PRIVATE GTest::gtest seriema_build_flags)
add_dependencies(bootstrap_failure_test seriema-run bootstrap_mp_test)
add_test(NAME mp.bootstrap.failures
         COMMAND bootstrap_failure_test --launcher $<TARGET_FILE:seriema-run>
                 --program $<TARGET_FILE:bootstrap_mp_test>)
set_tests_properties(mp.bootstrap.failures PROPERTIES LABELS multiproc TIMEOUT 300)

find_program(SERIEMA_MPIRUN mpirun)
if(SERIEMA_MPIRUN)
  add_test(NAME mp.bootstrap.mpirun_np2
           COMMAND ${SERIEMA_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                   $<TARGET_FILE:bootstrap_mp_test> --np 2 --machines 1 --mode pmix)
  set_tests_properties(mp.bootstrap.mpirun_np2 PROPERTIES LABELS multiproc TIMEOUT 120)
else()
  message(STATUS "mpirun not found: mp.bootstrap.mpirun_np2 (PMIx bootstrap) is not registered")
endif()

# A failed job leaves no process behind, including children of its ranks.
add_test(NAME mp.launcher.kills_rank_children
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launcher_group_test.sh $<TARGET_FILE:seriema-run>)
set_tests_properties(mp.launcher.kills_rank_children PROPERTIES LABELS multiproc TIMEOUT 60)
