// Shared types of the compiled core (mcoe_ros._mcoe). Units and conventions are those of the Python reference
// (mcoe_ros.multibody / mcoe_ros.ocp): SI units, Pinocchio dynamic parameters, tangent-space Jacobians.
#pragma once

#include <chrono>
#include <map>
#include <string>

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
// when enabled on the calling thread (and pinTiming() is not), only the sections (MCOE_TIMED, PinTimer with
// floor = false) are timed, not the Pinocchio calls: the solver's parts inside an iteration at a small overhead
inline bool& sectionTiming() {
  static thread_local bool on = false;
  return on;
}
// the same per call site (the call's text) and per MCOE_TIMED section (its label, timed whether or not its statements
// are Pinocchio calls, not counted in pinTime()): the floor's breakdown. Keyed by the site's string literal (one per
// site: no string built per call); pinSiteTimesByName() merges them by text
inline std::map<const char*, double>& pinSiteTimes() {
  static thread_local std::map<const char*, double> t;
  return t;
}
inline std::map<std::string, double> pinSiteTimesByName() {
  std::map<std::string, double> out;
  for (const auto& [site, t] : pinSiteTimes()) out[site] += t;
  return out;
}
struct PinTimer {
  std::chrono::steady_clock::time_point t0;
  const char* site;
  bool floor, on;
  PinTimer(const char* s, bool f) : site(s), floor(f), on(pinTiming() || (!f && sectionTiming())) {
    if (on) t0 = std::chrono::steady_clock::now();
  }
  ~PinTimer() {
    if (!on) return;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (floor) pinTime() += dt;
    pinSiteTimes()[site] += dt;
  }
};
// a statement that is one Pinocchio call
#define PIN_CALL(...)                    \
  do {                                   \
    PinTimer _pt(#__VA_ARGS__, true);    \
    __VA_ARGS__;                         \
  } while (0)
// statements timed as one section named label (breakdown only)
#define MCOE_TIMED(label, ...)    \
  do {                            \
    PinTimer _pt(label, false);   \
    __VA_ARGS__;                  \
  } while (0)

}  // namespace mcoe
