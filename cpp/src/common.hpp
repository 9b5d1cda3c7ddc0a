// Shared types of the compiled core (mcoe_ros._mcoe). Units and conventions are those of the Python reference
// (mcoe_ros.multibody / mcoe_ros.ocp): SI units, Pinocchio dynamic parameters, tangent-space Jacobians.
#pragma once

#include <chrono>

#include <Eigen/Core>
#include <Eigen/Dense>

namespace mcoe {

using Vec = Eigen::VectorXd;
using Mat = Eigen::MatrixXd;
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec3 = Eigen::Vector3d;
using Mat3 = Eigen::Matrix3d;

// Timing of the Pinocchio calls alone (the "Pinocchio-call floor" of an iteration, see Solver::pinocchioFloor):
// when enabled on the calling thread, every PIN_CALL(...) adds its wall time to pinTime().
inline bool& pinTiming() {
  static thread_local bool on = false;
  return on;
}
inline double& pinTime() {
  static thread_local double t = 0.0;
  return t;
}
struct PinTimer {
  std::chrono::steady_clock::time_point t0;
  bool on;
  PinTimer() : on(pinTiming()) {
    if (on) t0 = std::chrono::steady_clock::now();
  }
  ~PinTimer() {
    if (on) pinTime() += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};
// a statement that is one Pinocchio call
#define PIN_CALL(...) \
  do {                 \
    PinTimer _pt;      \
    __VA_ARGS__;       \
  } while (0)

}  // namespace mcoe
