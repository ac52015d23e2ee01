# Install headers, libraries and a package config so find_package(zero) works.
include(CMakePackageConfigHelpers)
install(DIRECTORY src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zero FILES_MATCHING PATTERN "*.h")
install(TARGETS zero zero_core zero_backend zero_config zero_comm zero_optim zero_data zero_model zero_io zero_sharding
  zero_engine zero_generation zero_pipeline zero_offload zero_openblas zero_warnings
  EXPORT zeroTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zero)
install(TARGETS zero_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT zeroTargets NAMESPACE zero:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zero)
configure_package_config_file(cmake/zeroConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/zeroConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zero)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/zeroConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zeroConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/zeroConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zero)
