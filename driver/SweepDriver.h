//===- driver/SweepDriver.h - The library behind remat-sweep ----*- C++ -*-===//
#ifndef REMAT_DRIVER_SWEEPDRIVER_H
#define REMAT_DRIVER_SWEEPDRIVER_H

namespace remat::driver {

/// The whole remat-sweep command line. \returns the exit code (130 when
/// interrupted, after writing the rows finished so far).
int sweepMain(int argc, char **argv);

} // namespace remat::driver

#endif // REMAT_DRIVER_SWEEPDRIVER_H
