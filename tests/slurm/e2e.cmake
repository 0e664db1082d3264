# The Slurm end to end test (slurm_e2e_test.sh): spank_vgpu.so in Debian's
# real slurmctld/slurmd/munged on the loopback, on the simulated node, beside
# vgpud. Skipped (77) where Slurm is not installed or the user is not root.
if(TARGET spank_vgpu AND TARGET vgpu AND NOT VGPU_SANITIZE)
  add_test(NAME slurm.e2e COMMAND ${CMAKE_CURRENT_LIST_DIR}/slurm_e2e_test.sh)
  set_tests_properties(slurm.e2e PROPERTIES
    LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77 RESOURCE_LOCK vgpu_slurm_job_dir
    ENVIRONMENT "SPANK=$<TARGET_FILE:spank_vgpu>;LIBVGPU=$<TARGET_FILE:vgpu>;VGPUD=$<TARGET_FILE:vgpud>;VGPUCTL=$<TARGET_FILE:vgpuctl>;PROBE=$<TARGET_FILE:vgpu_container_probe>;JOB=$<TARGET_FILE:vgpu_timeslice_job>;SIM_DIR=${VGPU_SIM_LIB_DIR}")
endif()
